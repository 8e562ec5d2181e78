"""The register as of a date: every model as the warehouse knew it at a past moment.

`diligence models --as-of TS --out FILE` builds the dbt project with var ``as_of`` and
``versions_at_as_of`` (see ``sql/macros/raw_source.sql``): each raw table reads as it
stood at that moment, the versions valid then from the last sync at or before it, so
every mart (connections, answers, documents and their expiry evaluated then, the
history marts and the change feed up to then, sync issues and freshness as they were)
is what a warehouse stopped after that sync would show. Nothing is replayed: the build
reads the versions the warehouse keeps.

The build never touches the warehouse's `analytics` or its analysts' copy. Under the
warehouse's writer lock (a sync waits meanwhile) the file is checkpointed and copied, by
the kernel, into a private folder beside FILE; the models are built anew on the copy
(their checks included), its `analytics` is written into FILE as the analysts' copy is
(one rename), and the folder goes.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import duckdb

from ..config import DEFAULT_EXPIRING_WITHIN_DAYS, DEFAULT_TIMEZONE
from ..errors import RegisterError, WarehouseNotReadyError
from ..warehouse import Warehouse, published_path
from ..warehouse.filemodes import make_dirs
from . import build_within_memory
from .checks import CheckResult
from .models import ModelsResult
from .publish import publish_analytics

__all__ = ["RegisterResult", "build_register", "synced_before"]


@dataclass(frozen=True)
class RegisterResult:
    """A register as of a date: its file (None when a check failed: nothing written),
    the moment, the sync it stands on and the build."""

    out: Path | None
    as_of: datetime  # aware, UTC
    #: the last successful sync at or before `as_of` (the figures stand on it)
    synced_at: datetime
    models: ModelsResult
    #: the evidence chain's head when the register was read (set by the step that reads it)
    evidence_head: str | None = None

    @property
    def failed_checks(self) -> list[CheckResult]:
        return [c for c in self.models.checks if not c.passed]


def synced_before(con: duckdb.DuckDBPyConnection, as_of: datetime) -> tuple[datetime | None, datetime | None]:
    """(the first successful sync, the last one at or before `as_of`) of the open
    warehouse `con`, by their snapshot times (aware, UTC); None when there is none."""
    exists = con.execute("select count(*) from duckdb_tables() where database_name = current_database() "
                         "and schema_name = 'raw' and table_name = 'sync_runs'").fetchone()
    if not exists or not exists[0]:
        return None, None
    first, last = con.execute(
        "select min(moment), max(moment) filter (where moment <= ?::timestamptz) from (select "
        "coalesce(synced_at, started_at) as moment from raw.sync_runs where status = 'success')",
        [as_of.isoformat()],
    ).fetchone() or (None, None)
    return _utc(first), _utc(last)


def build_register(
    warehouse: Path | Warehouse,
    as_of: datetime,
    out: Path,
    *,
    expiring_within_days: int = DEFAULT_EXPIRING_WITHIN_DAYS,
    time_zone: str = DEFAULT_TIMEZONE,
    wait_seconds: float = 0.0,
) -> RegisterResult:
    """Build every model as `warehouse` knew it at `as_of` (a naive datetime is UTC) into
    the DuckDB file `out` (replaced in one rename; its folder is made), see the module
    docstring. `out` is written only when every check passed. Raises
    :class:`RegisterError` for a moment before the first successful sync, an `out` that
    is the warehouse, its analysts' copy, a folder, a file other than DuckDB's or another
    warehouse, or a lake."""
    owner = warehouse if isinstance(warehouse, Warehouse) else Warehouse(warehouse)
    if owner.path is None:
        raise RegisterError("a register as of a date (--as-of with --out) needs a DuckDB file warehouse, "
                            "not a lake")
    moment = (as_of if as_of.tzinfo else as_of.replace(tzinfo=UTC)).astimezone(UTC)
    out = Path(out).expanduser().absolute()
    source = owner.path.expanduser().absolute()
    if out in (source, published_path(source)):
        raise RegisterError(f"--out {out} is the warehouse or its analysts' copy; name a file of its own")
    _check_replaceable(out)
    if not owner.exists():
        raise WarehouseNotReadyError(f"{owner.display()} does not exist: run `diligence sync` first")
    scratch = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=make_dirs(out.parent)))
    try:
        copy = scratch / "register.duckdb"
        with owner.writing(wait_seconds=wait_seconds), owner.session(memory_limit=None) as con:
            first, synced_at = synced_before(con, moment)
            if first is None:
                raise WarehouseNotReadyError(f"{owner.display()} has no successful sync yet: "
                                             "run `diligence sync` first")
            if synced_at is None:
                raise RegisterError(f"--as-of {moment.isoformat()} is before the warehouse's first sync "
                                    f"({first.isoformat()}): it knew nothing then")
            con.execute("checkpoint")  # the copy needs no WAL
            shutil.copyfile(source, copy)  # the kernel copies it (copy_file_range)
        # under the daily build's memory limits, a larger one after each out-of-memory
        models = build_within_memory(Warehouse(copy), as_of=moment, versions_at_as_of=True, full_refresh=True,
                                     expiring_within_days=expiring_within_days, time_zone=time_zone)
        written = None
        if all(check.passed for check in models.checks):
            with Warehouse(copy).session(memory_limit=None) as con:
                published = publish_analytics(copy, con)
            published.replace(out)
            written = out
        return RegisterResult(out=written, as_of=moment, synced_at=synced_at, models=models)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _check_replaceable(out: Path) -> None:
    """Raise :class:`RegisterError` unless `out` is new or a DuckDB file without a `raw`
    schema (an earlier register, an analysts' file): a folder, another kind of file or a
    warehouse is never replaced."""
    if not out.exists() and not out.is_symlink():
        return
    if out.is_symlink() or not out.is_file():
        raise RegisterError(f"--out {out} is not a regular file; name the DuckDB file to write")
    with open(out, "rb") as handle:
        is_duckdb = handle.read(12)[8:12] == b"DUCK"
    if not is_duckdb:
        raise RegisterError(f"--out {out} exists and is not a DuckDB file: it is never replaced")
    try:
        with duckdb.connect(str(out), read_only=True) as con:
            has_raw = con.execute("select count(*) from duckdb_tables() where schema_name = 'raw'").fetchone()
    except duckdb.Error as exc:
        raise RegisterError(f"--out {out} cannot be read as a DuckDB file ({str(exc).splitlines()[0]}); "
                            "it is not replaced") from None
    if has_raw and has_raw[0]:
        raise RegisterError(f"--out {out} is a warehouse (it has raw tables): it is never replaced")


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).astimezone(UTC)
