"""Two writers, and analysts sharing the warehouse with the schedule."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import duckdb
import pytest

from diligence.analytics import rebuild_analytics
from diligence.warehouse import WarehouseBusyError, published_path
from sandbox.server import SandboxServer
from tests.helpers import copy_warehouse, current_counts, query, sync

pytestmark = pytest.mark.slow


def test_second_sync_exits_clearly_while_first_runs(warehouse: Path) -> None:
    with SandboxServer(scale="small") as server:
        server.faults.latency_ms = 30
        first_done = threading.Event()
        outcome: dict[str, object] = {}

        def first() -> None:
            try:
                outcome["result"] = sync(server, warehouse, settings={"max_concurrency": 4})
            except BaseException as exc:  # pragma: no cover - reported below
                outcome["error"] = exc
            finally:
                first_done.set()

        thread = threading.Thread(target=first)
        thread.start()
        try:
            # the lock file appears as soon as the first sync holds the writer lock
            lock = warehouse.with_name(warehouse.name + ".lock")
            for _ in range(100):
                if lock.exists() and lock.read_text().strip():
                    break
                first_done.wait(0.05)
            with pytest.raises(WarehouseBusyError, match="another sync is writing"):
                sync(server, warehouse)
        finally:
            thread.join(timeout=120)
        assert "error" not in outcome, outcome.get("error")
        server.faults.latency_ms = 0
        baseline = current_counts(warehouse)
        # a later sync with nothing changed agrees exactly: nothing was corrupted
        sync(server, warehouse)
    assert current_counts(warehouse) == baseline
    assert query(warehouse, "select count(*) from raw.sync_runs") == [(4,)]


HOLD = textwrap.dedent(
    """
    import sys, time, duckdb
    con = duckdb.connect(sys.argv[1], read_only=True)
    print(con.execute("select count(*) from analytics.answers").fetchall()[0][0], flush=True)
    sys.stdin.readline()
    print(con.execute("select count(*) from analytics.answers").fetchall()[0][0], flush=True)
    """
)


def _hold_open(path: Path) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    process.stdout.readline()
    return process


def test_analyst_on_the_warehouse_blocks_sync_with_a_clear_message(warehouse: Path, synced_small: Path) -> None:
    with SandboxServer(scale="small") as server:
        copy_warehouse(synced_small, warehouse)  # the first sync of this world
        rebuild_analytics(warehouse)
        before = current_counts(warehouse)
        analyst = _hold_open(warehouse)
        try:
            with pytest.raises(WarehouseBusyError) as caught:
                sync(server, warehouse)
            assert f"process {analyst.pid}" in str(caught.value)
            assert str(published_path(warehouse)) in str(caught.value)
        finally:
            analyst.communicate("\n", timeout=30)
        # once the analyst has closed it, the sync goes through
        sync(server, warehouse)
    assert current_counts(warehouse) == before


def test_analyst_on_the_published_copy_never_blocks_the_schedule(warehouse: Path, synced_small: Path) -> None:
    with SandboxServer(scale="small") as server:
        copy_warehouse(synced_small, warehouse)  # the first sync of this world
        rebuild_analytics(warehouse)
        published = published_path(warehouse)
        analyst = _hold_open(published)
        try:
            ns = server.world.namespaces[0]
            company_id, type_id = next(
                (c, t) for c, t in server.world.readable_pairs(ns) if c != ns
            )
            server.world.set_answer(company_id, type_id, _input_field(server, company_id, type_id), None)
            sync(server, warehouse)
            result = rebuild_analytics(warehouse)
            assert result.published == published
        finally:
            old_count, new_session_count = analyst.communicate("\n", timeout=30)[0].split()[0], None
        con = duckdb.connect(str(published), read_only=True)
        try:
            new_session_count = con.execute("select count(*) from analytics.answers").fetchall()[0][0]
            answered = con.execute("select count(*) from analytics.answers where is_answered").fetchall()[0][0]
        finally:
            con.close()
    # the open session kept reading its copy; a new session sees the new build
    assert int(old_count) == new_session_count
    assert answered == query(warehouse, "select count(*) from analytics.answers where is_answered")[0][0]


def _input_field(server: SandboxServer, company_id: str, type_id: str) -> str:
    return next(
        f["id"]
        for form in server.world.questionnaire(company_id, type_id)["questionnaires"]["forms"]
        for f in form["fields"]
        if f["type"] == "Input" and f.get("information")
    )
