"""SIGKILL a sync during extract and during load; the next run must heal completely."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from sandbox import edits
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.helpers import current_counts, query, requests_answered, sync
from tests.processes import kill_when

pytestmark = pytest.mark.slow

SYNC = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from diligence.sync import run_sync, source_settings
    run_sync(Path(sys.argv[1]), source_settings(base_url=sys.argv[2], email=sys.argv[3],
                                                password=sys.argv[4], max_concurrency=4))
    """
)


def _versions(warehouse: Path) -> list[tuple[int, int, int, int]]:
    return query(
        warehouse,
        "select (select count(*) from raw.questionnaires), "
        "(select count(*) from raw.questionnaires where _dlt_valid_to is null), "
        "(select count(*) from raw.documents), "
        "(select count(*) from raw.documents where _dlt_valid_to is null)",
    )


def _kill_sync_when(server: SandboxServer, warehouse: Path, moment: Callable[[], bool]) -> None:
    process = subprocess.Popen(
        [sys.executable, "-c", SYNC, str(warehouse), server.base_url, DEFAULT_EMAIL, DEFAULT_PASSWORD],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    kill_when(process, moment)
    assert process.returncode == -signal.SIGKILL


def _loading(warehouse: Path) -> Callable[[], bool]:
    """True once dlt has a normalized package waiting to be loaded (the load step)."""
    pipelines = warehouse.parent / ".dlt-pipelines" / warehouse.stem

    def moment() -> bool:
        return any(pipelines.glob("*/load/normalized/*"))

    return moment


@pytest.fixture(scope="module")
def clean_reference(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, dict[str, int]], list[tuple[int, int, int, int]]]:
    """What two clean syncs with the change in between land (once for the module: both
    phases compare with the same world's clean run)."""
    reference = tmp_path_factory.mktemp("reference") / "reference.duckdb"
    with SandboxServer(scale="small") as server:
        sync(server, reference)
        _change_something(server)
        sync(server, reference)
    return current_counts(reference), _versions(reference)


def _change_something(server: SandboxServer) -> None:
    """A change between the two syncs, so history has something to keep."""
    ns = server.world.namespaces[0]
    company_id, type_id = next((c, t) for c, t in server.world.readable_pairs(ns) if c != ns)
    edits.delete_document(server.world, server.world.documents(company_id, type_id)[0]["id"])


@pytest.mark.parametrize("phase", ["extract", "load"])
def test_sigkill_then_rerun_matches_a_clean_run(
    phase: str, tmp_path: Path,
    clean_reference: tuple[dict[str, dict[str, int]], list[tuple[int, int, int, int]]],
) -> None:
    expected_counts, expected_versions = clean_reference
    warehouse = tmp_path / "crashed" / "warehouse.duckdb"
    warehouse.parent.mkdir()
    with SandboxServer(scale="small") as server:
        sync(server, warehouse)
        _change_something(server)
        if phase == "extract":
            server.faults.latency_ms = 20
            _kill_sync_when(server, warehouse, lambda: requests_answered(server) > 350)
            server.faults.latency_ms = 0
        else:
            _kill_sync_when(server, warehouse, _loading(warehouse))
        sync(server, warehouse)  # the next run heals
        sync(server, warehouse)  # and a further one changes nothing
    assert current_counts(warehouse) == expected_counts
    assert _versions(warehouse) == expected_versions
    duplicates = query(
        warehouse,
        "select count(*) from (select namespace_company_id, company_id, company_type_id "
        "from raw.questionnaires where _dlt_valid_to is null group by all having count(*) > 1)",
    )
    assert duplicates == [(0,)]


def test_a_kill_while_the_warehouse_file_is_created_leaves_no_broken_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DuckDB creates a new file before it writes the file's header: a sync killed in
    between must not leave a file that no later command opens. The file appears whole
    (header written, modes set) or not at all."""
    import duckdb

    from diligence.warehouse import Warehouse, lake

    path = tmp_path / "warehouse.duckdb"

    def killed(*_: object) -> None:
        raise SystemExit("killed before the file was linked into place")

    with monkeypatch.context() as patch:
        patch.setattr(lake.os, "link", killed)
        with pytest.raises(SystemExit):
            Warehouse(path).connect().close()
    assert not path.exists()
    assert list(tmp_path.iterdir()) == []  # nothing half-made left beside it

    Warehouse(path).connect().close()
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("select 1").fetchone() == (1,)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["warehouse.duckdb"]
