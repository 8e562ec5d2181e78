"""Move a warehouse file written by DuckDB 2.0 to the storage this release reads.

DuckDB is pinned to 1.5.5 (the newest with offline DuckLake extension wheels, see
pyproject.toml), which reads database files of storage versions 64..68 only; every
earlier release of this project wrote its warehouse with DuckDB 2.0 (storage version
999 in the file header). The shape:

- :func:`storage_version` reads the version number from a file's header (no DuckDB).
- :func:`require_readable` raises :class:`WarehouseFormatError`, one line naming the
  fix, for a file this DuckDB cannot open; the CLI and :class:`~diligence.warehouse.Warehouse`
  call it before anything opens the file.
- :func:`migrate_warehouse` (``diligence migrate-warehouse``) converts such a file:

  1. DuckDB 2.0 runs out of process (``uv run --isolated --with duckdb==2.0.0``, or a
     Python that has it, ``--duckdb2-python``): it checkpoints the old file, attaches
     a new one with ``STORAGE_VERSION 'v1.5.0'`` and ``COPY FROM DATABASE`` copies every
     schema, table, view and comment into it (``raw`` with dlt's ``_dlt_*`` state and
     the scd2 history, ``analytics``). It prints the row count of every table.
  2. This DuckDB opens the new file and counts again: every table, same rows.
  3. The old file is kept as ``<name>.duckdb2.bak`` (a hard link, so it exists before
     anything moves) and the new file atomically replaces the warehouse. Nothing of the
     user's data is ever deleted.

The writer lock is held throughout, so no sync writes the file meanwhile.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import WarehouseFormatError
from .location import WarehouseLocation
from .lock import writer_lock
from .paths import wal_of
from .sql import sql_identifier

__all__ = [
    "BACKUP_SUFFIX",
    "MigrationResult",
    "WarehouseFormatError",
    "migrate_warehouse",
    "require_readable",
    "storage_version",
]

#: Storage versions (file header) DuckDB 1.5.5 reads; 2.0 writes 999.
READABLE_VERSIONS = range(64, 69)
#: The storage the converted file is written with (read by DuckDB 1.5.x).
TARGET_STORAGE = "v1.5.0"
SOURCE_DUCKDB = "duckdb==2.0.0"
BACKUP_SUFFIX = ".duckdb2.bak"
MIGRATE_TIMEOUT_SECONDS = 3600.0
_MAGIC = b"DUCK"

# Run by DuckDB 2.0 out of process: argv = old file, new file; prints {table: rows}.
_COPY_SCRIPT = """
import json, sys, duckdb
old, new, storage = sys.argv[1:4]
q = lambda s: "'" + s.replace("'", "''") + "'"
con = duckdb.connect()
con.execute(f"attach {q(old)} as old_db")
con.execute("checkpoint old_db")
con.execute(f"attach {q(new)} as new_db (storage_version {q(storage)})")
con.execute("copy from database old_db to new_db")
tables = con.execute(
    "select schema_name, table_name from duckdb_tables() where database_name = 'old_db'"
).fetchall()
counts = {}
for schema, table in tables:
    ident = f'old_db."{schema}"."{table}"'
    counts[f"{schema}.{table}"] = con.execute(f"select count(*) from {ident}").fetchone()[0]
con.execute("detach new_db")
con.execute("detach old_db")
con.close()
print(json.dumps(counts))
"""


@dataclass
class MigrationResult:
    warehouse: Path
    migrated: bool
    backup: Path | None = None
    row_counts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def storage_version(path: Path) -> int | None:
    """The storage version in a DuckDB file's header; None when `path` is missing, empty
    or not a DuckDB file."""
    try:
        with open(path, "rb") as handle:
            header = handle.read(20)
    except OSError:
        return None
    if len(header) < 20 or header[8:12] != _MAGIC:
        return None
    return int.from_bytes(header[12:20], "little")


def needs_migration(path: Path) -> bool:
    version = storage_version(Path(path).expanduser())
    return version is not None and version not in READABLE_VERSIONS


def migrate_command(path: Path) -> str:
    """The command that converts `path` (what the error line tells users to run)."""
    return f"diligence migrate-warehouse --warehouse {path}"


def require_readable(path: Path) -> None:
    """Raise :class:`WarehouseFormatError` when DuckDB here cannot open `path` because a
    newer DuckDB wrote it. A missing file is fine (a sync creates it)."""
    path = Path(path).expanduser()
    version = storage_version(path)
    if version is None or version in READABLE_VERSIONS:
        return
    import duckdb  # start-up (DuckDB 0.13 s of imports): every command checks the file; only this error needs DuckDB

    raise WarehouseFormatError(
        f"{path} was written by a newer DuckDB (storage version {version}) than this "
        f"release's DuckDB {duckdb.__version__} reads: convert it once with "
        f"`{migrate_command(path)}` (the original is kept as {path.name}{BACKUP_SUFFIX})"
    )


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + BACKUP_SUFFIX)


def duckdb2_command(python: str | None = None) -> list[str]:
    """The command running a Python with DuckDB 2.0: `python` if given, else uv's
    isolated environment (``uv`` on PATH, else ``python -m uv``)."""
    if python:
        return [python]
    uv = shutil.which("uv")
    launcher = [uv] if uv else [sys.executable, "-m", "uv"]
    if not uv:
        probe = subprocess.run([*launcher, "--version"], capture_output=True, timeout=60)
        if probe.returncode != 0:
            launcher = ["python3", "-m", "uv"]
    return [*launcher, "run", "--no-project", "--isolated", "--with", SOURCE_DUCKDB, "python"]


def migrate_warehouse(
    path: Path,
    *,
    python: str | None = None,
    timeout_seconds: float = MIGRATE_TIMEOUT_SECONDS,
    wait_seconds: float = 0.0,
) -> MigrationResult:
    """Convert the DuckDB 2.0 warehouse at `path` in place (see the module docstring).

    A file this DuckDB already reads is left alone (``migrated=False``). Raises
    :class:`WarehouseFormatError` when it cannot convert; the warehouse is then unchanged.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise WarehouseFormatError(f"no warehouse at {path}")
    if not needs_migration(path):
        return MigrationResult(warehouse=path, migrated=False)
    backup = backup_path(path)
    if backup.exists():
        raise WarehouseFormatError(
            f"{backup} already exists: move it away first (it is an earlier backup)"
        )
    started = time.perf_counter()
    with writer_lock(path, wait_seconds=wait_seconds):
        new = path.with_name(f".{path.name}.migrating")
        new.unlink(missing_ok=True)
        wal_of(new).unlink(missing_ok=True)
        try:
            expected = _copy_with_duckdb2(path, new, python, timeout_seconds)
            actual = _row_counts(new)
            if actual != expected:
                differ = sorted(
                    t for t in set(actual) | set(expected) if actual.get(t) != expected.get(t)
                )
                raise WarehouseFormatError(
                    f"the converted copy of {path} does not match it in "
                    f"{', '.join(differ[:5])}: the warehouse is unchanged"
                )
            os.link(path, backup)  # the original stays reachable before anything moves
            wal = wal_of(path)
            if wal.exists():
                os.replace(wal, wal_of(backup))
            os.replace(new, path)
        except BaseException:
            new.unlink(missing_ok=True)
            wal_of(new).unlink(missing_ok=True)
            raise
    return MigrationResult(
        warehouse=path,
        migrated=True,
        backup=backup,
        row_counts=expected,
        seconds=time.perf_counter() - started,
    )


def _copy_with_duckdb2(
    old: Path, new: Path, python: str | None, timeout_seconds: float
) -> dict[str, int]:
    command = [*duckdb2_command(python), "-c", _COPY_SCRIPT, str(old), str(new), TARGET_STORAGE]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_seconds, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WarehouseFormatError(
            f"could not run DuckDB 2.0 to read {old} ({type(exc).__name__}: {exc}); "
            "pass --duckdb2-python with a Python that has duckdb==2.0.0 installed"
        ) from None
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        reason = lines[-1].strip() if lines else f"exit code {done.returncode}"
        raise WarehouseFormatError(
            f"DuckDB 2.0 could not copy {old}: {reason} (the warehouse is unchanged; "
            "offline? pass --duckdb2-python with a Python that has duckdb==2.0.0)"
        )
    try:
        counts = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise WarehouseFormatError(
            f"DuckDB 2.0 gave no row counts for {old}: the warehouse is unchanged"
        ) from None
    return {str(k): int(v) for k, v in counts.items()}


def _row_counts(path: Path) -> dict[str, int]:
    from .lake import (
        connect,  # start-up (DuckDB 0.13 s of imports): lake imports DuckDB; only a migration needs it
    )

    con = connect(WarehouseLocation(path=path), read_only=True)
    try:
        tables = con.execute(
            "select schema_name, table_name from duckdb_tables() "
            "where database_name = current_database()"
        ).fetchall()
        return {
            f"{schema}.{table}": con.execute(
                f"select count(*) from {sql_identifier(schema)}.{sql_identifier(table)}"
            ).fetchone()[0]
            for schema, table in tables
        }
    finally:
        con.close()
