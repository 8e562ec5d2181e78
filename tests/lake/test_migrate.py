"""A warehouse written by DuckDB 2.0 (every earlier release) moves to the pinned DuckDB:
opening it says in one line how; `diligence migrate-warehouse` converts it, keeps the
original, and later syncs continue its dlt state and scd2 history.

The 2.0 file is made for real: a sandbox sync with this release's DuckDB, then copied
by DuckDB 2.0 run out of process the same way the migration runs it (uv's isolated
environment), into a file with 2.0's storage (version 999).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import duckdb
import pytest

from diligence.analytics import rebuild_analytics
from diligence.errors import WarehouseFormatError
from diligence.warehouse.migrate import (
    BACKUP_SUFFIX,
    READABLE_VERSIONS,
    duckdb2_command,
    require_readable,
    storage_version,
)
from sandbox.server import SandboxServer
from tests.cli.helpers import run
from tests.helpers import current_counts, query, sync

TIMEOUT = 300

_TO_DUCKDB2 = """
import sys, duckdb
src, dst = sys.argv[1:3]
con = duckdb.connect()
con.execute(f"attach '{src}' as src (read_only)")
con.execute(f"attach '{dst}' as dst")
con.execute("copy from database src to dst")
con.close()
print(duckdb.__version__)
"""


def _written_by_duckdb2(source: Path, target: Path) -> None:
    done = subprocess.run(
        [*duckdb2_command(), "-c", _TO_DUCKDB2, str(source), str(target)],
        capture_output=True, text=True, timeout=TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "2.0.0"


def _counts(path: Path) -> dict[str, int]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        tables = con.execute(
            "select schema_name, table_name from duckdb_tables() order by all"
        ).fetchall()
        return {
            f"{s}.{t}": con.execute(f'select count(*) from "{s}"."{t}"').fetchone()[0]
            for s, t in tables
        }
    finally:
        con.close()


@pytest.mark.timeout(600)
def test_a_duckdb2_warehouse_is_named_then_migrated_and_syncs_continue(
    sandbox: SandboxServer, tmp_path: Path
) -> None:
    made = tmp_path / "made.duckdb"
    sync(sandbox, made)
    rebuild_analytics(made)
    expected = _counts(made)
    assert any(name.startswith("raw._dlt_") for name in expected)

    warehouse = tmp_path / "warehouse.duckdb"
    _written_by_duckdb2(made, warehouse)
    assert storage_version(warehouse) not in READABLE_VERSIONS
    # dlt's local state of the warehouse moves with it (it lives beside the file)
    (tmp_path / ".dlt-pipelines" / "made").rename(tmp_path / ".dlt-pipelines" / "warehouse")

    # opening it: one line naming the fix, no traceback, exit 1, nothing written
    with pytest.raises(WarehouseFormatError, match="migrate-warehouse --warehouse"):
        require_readable(warehouse)
    before = warehouse.read_bytes()
    for command in (["status"], ["models"], ["sync", "--base-url", sandbox.base_url]):
        done = run([*command, "--warehouse", str(warehouse)], tmp_path)
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        assert len(lines) == 1, done.stderr
        assert f"diligence migrate-warehouse --warehouse {warehouse}" in lines[0]
        assert "Traceback" not in done.stderr
    assert warehouse.read_bytes() == before

    done = run(["migrate-warehouse", "--warehouse", str(warehouse)], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "counts verified" in done.stdout
    backup = warehouse.with_name(warehouse.name + BACKUP_SUFFIX)
    assert backup.read_bytes() == before  # the user's original, untouched
    assert storage_version(warehouse) in READABLE_VERSIONS
    assert _counts(warehouse) == expected  # every table, dlt's _dlt_* included

    # a second run has nothing to do; the backup is never overwritten
    again = run(["migrate-warehouse", "--warehouse", str(warehouse)], tmp_path)
    assert again.returncode == 0 and "nothing to do" in again.stdout

    # syncs continue on the migrated state: the same data adds no scd2 versions
    versions = query(warehouse, "select count(*) from raw.companies")[0][0]
    current = current_counts(warehouse)
    loads = query(warehouse, "select count(*) from raw._dlt_loads")[0][0]
    result = sync(sandbox, warehouse)
    assert not result.failed
    assert query(warehouse, "select count(*) from raw.companies")[0][0] == versions
    assert current_counts(warehouse) == current
    assert query(warehouse, "select count(*) from raw._dlt_loads")[0][0] > loads
    rebuild_analytics(warehouse)
    assert _counts(warehouse)["analytics.connections"] == expected["analytics.connections"]
