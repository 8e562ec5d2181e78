"""`diligence replay`: a warehouse rebuilt from the evidence alone equals the original, row
versions included, after a history with changes between syncs and a sync killed and
resumed; `--until` stops at a sync; the new warehouse's own evidence verifies."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from sandbox import edits
from sandbox.server import SandboxServer
from tests.cli.helpers import SECRET, run
from tests.evidence.test_verify import change_an_answer
from tests.helpers import copy_warehouse, requests_answered, settings_for
from tests.processes import kill_when

#: columns that differ by nature between a sync and its replay: dlt's own ids, when and how
#: long the run took, and how many requests it sent (a resumed sync sent only what it had
#: not kept; its replay answers every request from the evidence)
NOT_COMPARED = ("_dlt_load_id", "_dlt_id", "started_at", "finished_at", "requests")

SYNC = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from diligence.sync import run_sync, source_settings
    run_sync(Path(sys.argv[1]), source_settings(base_url=sys.argv[2], email=sys.argv[3], password=sys.argv[4],
                                                max_concurrency=4, token_store_path=None))
    """
)


def raw_tables(warehouse: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every raw table's rows (versions included), without what differs by nature."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        found = {}
        for (table,) in con.execute("select table_name from information_schema.tables where table_schema = 'raw' "
                                    "and table_name not like '\\_dlt%' escape '\\' order by 1").fetchall():
            columns = [c for (c,) in con.execute(
                "select column_name from information_schema.columns where table_schema = 'raw' and table_name = ? "
                "order by ordinal_position", [table]).fetchall() if c not in NOT_COMPARED]
            rows = con.execute(f"select {', '.join(columns)} from raw.{table}").fetchall()
            found[table] = sorted(rows, key=repr)
        return found
    finally:
        con.close()


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, list[str]]]:
    """Three syncs of a world that changes between them (an answer, a document, a
    connection), the second one killed half-way and resumed: (the warehouse, a copy of
    it after the second sync, the sync ids)."""
    folder = tmp_path_factory.mktemp("original")
    warehouse = folder / "w.duckdb"
    from diligence.sync import run_sync

    with SandboxServer(scale="small", password=SECRET) as server:
        settings = settings_for(server, password=SECRET, max_concurrency=4)
        ids = [run_sync(warehouse, settings).sync_id]
        world = server.world
        ns = world.namespaces[0]
        pairs = [(c, t) for c, t in world.readable_pairs(ns) if c != ns]
        change_an_answer(server, *pairs[0])
        document = world.documents(*pairs[1])[0]["id"]
        edits.update_document(world, document, set_fields={"name": "renewed certificate.pdf"})
        server.faults.latency_ms = 10
        server.app.stats.reset()
        process = subprocess.Popen([sys.executable, "-c", SYNC, str(warehouse), server.base_url, server.email, SECRET],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        kill_when(process, lambda: requests_answered(server) >= 150)
        assert process.returncode == -signal.SIGKILL
        server.faults.latency_ms = 0
        resumed = run_sync(warehouse, settings)
        assert not resumed.failed and sum(o.requests_kept for o in resumed.namespaces) > 0
        ids.append(resumed.sync_id)
        after_second = copy_warehouse(warehouse, folder / "second" / "w.duckdb")
        edits.remove_connection(world, ns, pairs[2][0])
        edits.delete_document(world, next(d["id"] for c, t in pairs[3:] for d in world.documents(c, t)))
        change_an_answer(server, *pairs[1])
        ids.append(run_sync(warehouse, settings).sync_id)
    yield warehouse, after_second, ids


def test_a_replay_equals_the_original_history_included(original: tuple[Path, Path, list[str]],
                                                       tmp_path: Path) -> None:
    warehouse, _second, ids = original
    new = tmp_path / "replayed.duckdb"
    result = run(["replay", "--evidence", str(warehouse.with_name("w.evidence")), "-w", str(new)], tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # the killed sync committed what it could before the kill: it is replayed for that part
    assert [line.split(":")[0] for line in lines[:-1]] == [f"replayed sync {i}" for i in sorted(
        {*ids, *_interrupted(warehouse)})]
    assert lines[-1].startswith(f"replayed {len(lines) - 1} syncs into {new}; models built; its evidence head ")
    expected, found = raw_tables(warehouse), raw_tables(new)
    assert found.keys() == expected.keys()
    for table in expected:
        assert found[table] == expected[table], table
    versions = duckdb.connect(str(new), read_only=True).execute(
        "select count(*) from raw.questionnaires where _dlt_valid_to is not null").fetchone()
    assert versions is not None and versions[0] >= 2  # the answers that changed have their history
    verified = run(["verify", "-w", str(new)], tmp_path)
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.startswith("verified ")


def test_replay_until_a_sync_stops_there(original: tuple[Path, Path, list[str]], tmp_path: Path) -> None:
    warehouse, second, ids = original
    new = tmp_path / "until.duckdb"
    result = run(["replay", "--evidence", str(warehouse.with_name("w.evidence")), "-w", str(new),
                  "--until", ids[1], "--no-models"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert raw_tables(new) == raw_tables(second)


def test_what_replay_cannot_do_is_a_clear_error(original: tuple[Path, Path, list[str]], tmp_path: Path) -> None:
    warehouse, _second, _ids = original
    store = str(warehouse.with_name("w.evidence"))
    existing = run(["replay", "--evidence", store, "-w", str(warehouse)], tmp_path)
    assert existing.returncode == 2
    assert "already exists: a replay builds a new warehouse" in existing.stderr
    unknown = run(["replay", "--evidence", store, "-w", str(tmp_path / "n.duckdb"), "--until", "nope"], tmp_path)
    assert unknown.returncode == 2
    assert "--until nope: no such sync in the chain" in unknown.stderr
    missing = run(["replay", "--evidence", str(tmp_path / "none"), "-w", str(tmp_path / "n.duckdb")], tmp_path)
    assert missing.returncode == 2
    assert "has no syncs/ folder" in missing.stderr
    assert not (tmp_path / "n.duckdb").exists()


def _interrupted(warehouse: Path) -> list[str]:
    """The syncs sealed as interrupted that committed a namespace (they are replayed)."""
    from diligence.evidence.chain import read_store

    store = read_store(warehouse.with_name("w.evidence"))
    return [m.sync_id for m in store.sealed if (m.seal or {}).get("how") == "interrupted"
            and any(status == "committed" for status, _error in m.outcomes.values())]
