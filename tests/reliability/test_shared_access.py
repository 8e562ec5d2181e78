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
from sandbox import edits
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
            edits.set_answer(server.world, company_id, type_id, _input_field(server, company_id, type_id), None)
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


def test_a_reader_that_comes_mid_fetch_is_told_who_writes_and_never_aborts_the_sync(
    warehouse: Path, synced_small: Path
) -> None:
    """The sync holds the file from its start: a reader opening it after 300 requests
    (DuckDB read-only, `diligence export`, `diligence status`) is refused with who writes
    it, and the sync goes on to commit every namespace."""
    import os

    from diligence.warehouse import Warehouse
    from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD
    from tests.cli.helpers import run as run_cli
    from tests.helpers import requests_answered

    copy_warehouse(synced_small, warehouse)  # readers find a synced warehouse
    with SandboxServer(scale="medium") as server:
        server.faults.latency_ms = 20
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DILIGENCE_"))}
        credentials = {"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
                       "SOURCES__COMPANY_CONNECTIONS__PASSWORD": DEFAULT_PASSWORD}
        syncing = subprocess.Popen(
            [str(Path(sys.executable).with_name("diligence")), "sync", "--base-url", server.base_url,
             "-w", str(warehouse), "--no-models", "--wait", "60"],
            env=env | credentials, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        try:
            while requests_answered(server) < 300:
                assert syncing.poll() is None, syncing.stdout.read()  # type: ignore[union-attr]
                threading.Event().wait(0.01)
            with pytest.raises(WarehouseBusyError, match=rf"is being written by diligence sync "
                                                         rf"\(pid {syncing.pid}\); query the analysts' copy"):
                Warehouse(warehouse).connect(read_only=True)
            with pytest.raises(duckdb.Error):  # an analyst's own DuckDB: refused, the sync unharmed
                duckdb.connect(str(warehouse), read_only=True)
            exported = run_cli(["export", "-w", str(warehouse), "--out", "out"], warehouse.parent)
            assert exported.returncode == 1
            assert f"is being written by diligence sync (pid {syncing.pid})" in exported.stderr
            status = run_cli(["status", "-w", str(warehouse)], warehouse.parent)
            assert status.returncode == 0 and f"a sync (pid {syncing.pid}) is writing" in status.stdout
            assert requests_answered(server) < 2_900, "the fetch was over before the readers came"
        finally:
            output = syncing.communicate(timeout=300)[0]
    assert syncing.returncode == 0, output[-3000:]
    assert query(warehouse, "select count(distinct sync_id) from raw.sync_runs where status = 'success'") == [(2,)]
