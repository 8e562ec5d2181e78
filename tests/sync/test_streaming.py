"""The streaming engine: each namespace is committed alone, as soon as it is read.

* a namespace is loaded while another one is still being fetched;
* a namespace whose fetch fails leaves nothing behind (no rows, no staged files, no
  pending load), and its previous data and history stay;
* rows are staged in batches, never held whole.
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from diligence.sync import NamespaceOutcome
from diligence.warehouse import Warehouse, pipeline_for, pipelines_dir_of
from pipelines.company_connections.client import ServiceClient
from pipelines.company_connections.errors import RequestFailedError
from pipelines.company_connections.staging import NamespaceStage, read_batches
from sandbox import edits
from sandbox.server import SandboxServer
from tests.helpers import CREDENTIALS, copy_warehouse, current_counts, query, sync

DATA_TABLES = ("user_roles", "companies", "connections", "questionnaire_templates", "questionnaires", "documents")


def _hold_until(monkeypatch: pytest.MonkeyPatch, namespace: str, released: threading.Event) -> None:
    """The connection list of `namespace` answers only once `released` is set (bounded)."""
    original = ServiceClient.connections

    async def held(self: ServiceClient, ns: str) -> Any:
        if ns == namespace:
            deadline = time.monotonic() + 120
            while not released.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        return await original(self, ns)

    monkeypatch.setattr(ServiceClient, "connections", held)


def test_a_namespace_is_committed_while_another_is_still_fetching(
    sandbox: SandboxServer, warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast, slow = sandbox.world.namespaces[:2]
    # the slow namespace cannot finish its fetch before the fast one is committed:
    # its connection list answers only once the fast namespace's outcome is reported
    fast_committed = threading.Event()
    _hold_until(monkeypatch, slow, fast_committed)
    reported: list[tuple[str, datetime]] = []

    def on_namespace(outcome: NamespaceOutcome) -> None:
        reported.append((outcome.namespace_company_id, datetime.now(timezone.utc)))
        if outcome.namespace_company_id == fast:
            # the fast namespace is in the warehouse, visible to another connection (of
            # this process: the sync holds the file open until it ends)
            con = duckdb.connect(str(warehouse))
            try:
                seen = con.execute(
                    "select count(*) from raw.questionnaires where namespace_company_id = ?", [fast]
                ).fetchone()[0]
            finally:
                con.close()
            assert seen > 0
            fast_committed.set()

    result = sync(sandbox, warehouse, on_namespace=on_namespace)

    assert not result.failed
    assert fast_committed.is_set()
    assert [ns for ns, _ in reported] == [fast, slow]
    # when the fast namespace's load was committed (dlt's load record), the slow one's
    # fetch had not finished yet
    committed = dict(
        query(
            warehouse,
            "select r.namespace_company_id, l.inserted_at from raw.sync_runs r "
            "join raw._dlt_loads l on l.load_id = r._dlt_load_id where r.sync_id = ?",
            result.sync_id,
        )
    )
    fetched = dict(
        query(
            warehouse,
            "select namespace_company_id, finished_at from raw.sync_runs where sync_id = ?",
            result.sync_id,
        )
    )
    assert committed[fast] < fetched[slow], (committed, fetched)
    assert committed[fast] < committed[slow]
    # each namespace is its own load, with its own rows
    loads = query(
        warehouse,
        "select namespace_company_id, count(distinct _dlt_load_id) from raw.questionnaires group by 1",
    )
    assert dict(loads) == {fast: 1, slow: 1}


def _fail_documents_after(monkeypatch: pytest.MonkeyPatch, namespace: str, calls: int) -> None:
    """The documents of `namespace` fail for good after `calls` successful requests."""
    original = ServiceClient.documents
    seen = {"n": 0}

    async def failing(self: ServiceClient, ns: str, company_id: str, company_type_id: str) -> Any:
        if ns == namespace:
            seen["n"] += 1
            if seen["n"] > calls:
                raise RequestFailedError(
                    "", method="GET", path="/api/documents", namespace=ns, attempts=6, last_error="HTTP 503"
                )
        return await original(self, ns, company_id, company_type_id)

    monkeypatch.setattr(ServiceClient, "documents", failing)


def test_a_failed_namespace_leaves_nothing_behind(
    sandbox: SandboxServer, warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good, broken = sandbox.world.namespaces[:2]
    # fails half-way: many of its rows were already read and staged
    _fail_documents_after(monkeypatch, broken, 20)

    result = sync(sandbox, warehouse, settings={"batch_size": 5})

    assert [o.namespace_company_id for o in result.failed] == [broken]
    assert "failed after 6 attempt(s)" in (result.failed[0].error or "")
    for table in DATA_TABLES:
        namespaces = {ns for (ns,) in query(warehouse, f"select distinct namespace_company_id from raw.{table}")}
        assert namespaces == {good}, table
    assert query(
        warehouse, "select namespace_company_id, status, rows_loaded from raw.sync_runs order by 2"
    ) == [(broken, "failed", 0), (good, "success", next(o.rows for o in result.namespaces if o.status == "success"))]
    # nothing staged or pending that a later run could pick up
    staging = pipelines_dir_of(warehouse) / "staging"
    assert not any(staging.rglob("*")) if staging.exists() else True
    assert not pipeline_for(warehouse).has_pending_data


def test_a_failed_namespace_keeps_its_previous_data_and_history(
    sandbox: SandboxServer, warehouse: Path, monkeypatch: pytest.MonkeyPatch, synced_small: Path
) -> None:
    copy_warehouse(synced_small, warehouse)  # the first sync of this world
    before = current_counts(warehouse)
    versions = query(warehouse, "select namespace_company_id, count(*), count(_dlt_valid_to) from raw.documents group by 1 order by 1")
    good, broken = sandbox.world.namespaces[:2]
    edits.remove_connection(sandbox.world, broken, next(c for c, _ in sandbox.world.readable_pairs(broken) if c != broken))
    _fail_documents_after(monkeypatch, broken, 20)

    result = sync(sandbox, warehouse, settings={"batch_size": 5})

    assert [o.namespace_company_id for o in result.failed] == [broken]
    after = current_counts(warehouse)
    for table, counts in before.items():
        assert after[table][broken] == counts[broken], table  # the removal did not retire anything
    assert query(warehouse, "select namespace_company_id, count(*), count(_dlt_valid_to) from raw.documents group by 1 order by 1") == versions


def test_rows_are_staged_in_batches(tmp_path: Path) -> None:
    stage = NamespaceStage.create(tmp_path, "ns/1", batch_size=5)
    synced_at = datetime.now(timezone.utc)
    held: list[int] = []
    for i in range(23):
        stage.append(
            "questionnaire_templates",
            {"namespace_company_id": "ns/1", "company_type_id": str(i), "forms_json": "[]",
             "content_hash": f"h{i}", "synced_at": synced_at},
        )
        writer = stage._writers["questionnaire_templates"]
        held.append(len(writer.buffer) + writer.held)
    assert max(held) < 5  # a full batch goes to the file at once
    tables = stage.close()
    staged = tables["questionnaire_templates"]
    assert staged.rows == 23 and staged.path is not None
    assert pq.ParquetFile(staged.path).num_row_groups == 4  # 4 full batches in the file
    assert sum(b.num_rows for b in staged.batches) == 3  # the rest handed over in memory
    read = pa.concat_tables(read_batches(staged))
    assert read.column("company_type_id").to_pylist() == [str(i) for i in range(23)]  # in order
    # a table without rows still yields one empty table (its merge must run)
    assert [t.num_rows for t in read_batches(tables["documents"])] == [0]
    stage.discard()
    assert not stage.folder.exists()


def test_a_table_smaller_than_a_batch_never_touches_the_disk(tmp_path: Path) -> None:
    stage = NamespaceStage.create(tmp_path, "ns/1", batch_size=1000)
    synced_at = datetime.now(timezone.utc)
    for i in range(120):  # converted 50 rows at a time as they arrive
        stage.append(
            "questionnaire_templates",
            {"namespace_company_id": "ns/1", "company_type_id": str(i), "forms_json": "[]",
                 "content_hash": f"h{i}", "synced_at": synced_at},
        )
    writer = stage._writers["questionnaire_templates"]
    assert [b.num_rows for b in writer.batches] == [50, 50] and len(writer.buffer) == 20
    staged = stage.close()["questionnaire_templates"]
    assert staged.path is None and not any(stage.folder.iterdir())
    assert [b.num_rows for b in staged.batches] == [50, 50, 20]
    (table,) = read_batches(staged)
    assert table.num_rows == 120 and table.column("company_type_id").to_pylist() == [str(i) for i in range(120)]
    assert [t.num_rows for t in read_batches(staged, batch_size=50)] == [50, 50, 20]  # read in bounded pieces
    stage.discard()


def test_request_slots_go_to_the_first_namespace_first() -> None:
    from pipelines.company_connections.limits import PriorityGate

    async def scenario() -> list[int]:
        gate = PriorityGate(1)
        served: list[int] = []
        await gate.acquire(0)  # the only slot is taken

        async def request(priority: int) -> None:
            await gate.acquire(priority)
            served.append(priority)
            await asyncio.sleep(0)
            gate.release()

        waiting = [asyncio.create_task(request(p)) for p in (2, 1, 2, 0, 1)]
        await asyncio.sleep(0)
        gate.release()
        await asyncio.gather(*waiting)
        return served

    assert asyncio.run(scenario()) == [0, 1, 1, 2, 2]


def test_settings_resolve_once_from_config_and_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipelines.company_connections.config import DEFAULT_BATCH_SIZE, resolve_settings

    monkeypatch.setenv("SOURCES__COMPANY_CONNECTIONS__BASE_URL", "http://127.0.0.1:1")
    monkeypatch.setenv("SOURCES__COMPANY_CONNECTIONS__MAX_CONCURRENCY", "7")
    settings = resolve_settings(request_timeout=3, token_store_path=None)
    assert (settings.base_url, settings.max_concurrency, settings.request_timeout) == ("http://127.0.0.1:1", 7, 3)
    assert settings.batch_size == DEFAULT_BATCH_SIZE
    assert not settings.token_store_path  # explicitly none: renewed tokens are not saved
    with pytest.raises(TypeError, match="max_concurency"):
        resolve_settings(max_concurency=3)


class _Requests:
    """Progress listener: requests finished per namespace, and what every namespace had
    finished when each namespace's latest request finished."""

    def __init__(self) -> None:
        self.finished: dict[str, int] = {}
        self.at_latest: dict[str, dict[str, int]] = {}

    def planned(self, namespace: str, requests: int) -> None:
        pass

    def done(self, namespace: str, requests: int, rows: int) -> None:
        self.finished[namespace] = self.finished.get(namespace, 0) + requests
        self.at_latest[namespace] = dict(self.finished)

    def waiting(self, namespace: str, state: str) -> None:
        pass


def test_namespaces_complete_one_after_another_under_a_shared_limit(
    sandbox: SandboxServer, tmp_path: Path
) -> None:
    """With one request slot for the whole run, the first namespace is served first:
    it completes while the second has made only a small part of its requests, so the
    first one's load can overlap the second one's fetch."""
    from pipelines.company_connections import NamespaceSnapshot, resolve_settings, stream_namespaces

    first, second = sandbox.world.namespaces[:2]
    settings = resolve_settings(
        base_url=sandbox.base_url, namespaces=[first, second], max_concurrency=1, token_store_path=None, **CREDENTIALS
    )
    progress = _Requests()
    completed = []
    with stream_namespaces(settings, staging_dir=tmp_path / "stage", progress=progress) as stream:
        for result in stream:
            assert isinstance(result, NamespaceSnapshot), result
            completed.append(result.namespace_company_id)
    assert completed == [first, second]
    totals = progress.finished
    # read when the first namespace's last request finished, not when its result reached
    # this loop: on a loaded machine the second one's requests go on in between
    when_first_done = progress.at_latest[first]
    assert when_first_done[first] == totals[first]
    # the second namespace only gets the slot while the first has no request waiting
    # (served first come, first served, it would have made about 40 % of its requests)
    assert when_first_done.get(second, 0) <= totals[second] // 10, (when_first_done, totals)


def test_connections_are_read_a_window_at_a_time(
    sandbox: SandboxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tasks alive during a fetch are bounded by the window of open connections,
    not by the number of connections; the rows read are the same."""
    from pipelines.company_connections import NamespaceSnapshot, resolve_settings
    from pipelines.company_connections.extract import extract_namespaces
    from pipelines.company_connections.staging import read_batches

    namespace = sandbox.world.namespaces[0]
    settings = resolve_settings(base_url=sandbox.base_url, max_concurrency=2, token_store_path=None, **CREDENTIALS)
    original = ServiceClient.connection
    alive: list[int] = []

    async def counting(self: ServiceClient, ns: str, company_id: str) -> Any:
        alive.append(len(asyncio.all_tasks()))
        return await original(self, ns, company_id)

    monkeypatch.setattr(ServiceClient, "connection", counting)

    def fetch(window: int) -> tuple[int, dict[str, int]]:
        alive.clear()

        async def run() -> list[Any]:
            async with settings.client() as client:
                return await extract_namespaces(
                    client,
                    [namespace],
                    staging_dir=tmp_path / f"window-{window}",
                    on_complete=lambda result: None,
                    concurrency=2,
                    open_connections=window,
                )

        (result,) = asyncio.run(run())
        assert isinstance(result, NamespaceSnapshot), result
        rows = {name: sum(t.num_rows for t in read_batches(table)) for name, table in result.tables.items()}
        return max(alive), rows

    connections = len(sandbox.world.readable_pairs(namespace))
    bounded, rows_bounded = fetch(2)
    unbounded, rows_unbounded = fetch(100_000)
    assert rows_bounded == rows_unbounded and rows_bounded["connections"] > 10
    assert bounded <= 20, bounded  # 2 open connections: a handful of tasks each
    assert unbounded > 3 * bounded, (bounded, unbounded, connections)


def test_a_sync_opens_the_file_once_and_checkpoints_only_while_it_waits(
    sandbox: SandboxServer, warehouse: Path, monkeypatch: pytest.MonkeyPatch, synced_small: Path
) -> None:
    # the warehouse exists (a copy of the first sync of this world): a sync reads its
    # synced namespaces first
    copy_warehouse(synced_small, warehouse)
    fast, slow = sandbox.world.namespaces[:2]
    fast_committed = threading.Event()
    _hold_until(monkeypatch, slow, fast_committed)
    opened: list[tuple[str, bool]] = []
    real_connect = duckdb.connect

    def counting_connect(database: Any = ":memory:", read_only: bool = False, *args: Any, **kwargs: Any) -> Any:
        opened.append((str(database), read_only))
        return real_connect(database, read_only, *args, **kwargs)

    checkpoints: list[list[str]] = []
    real_checkpoint = Warehouse.checkpoint

    def recording_checkpoint(self: Warehouse) -> None:
        checkpoints.append([ns for ns, _ in reported])
        real_checkpoint(self)

    monkeypatch.setattr(duckdb, "connect", counting_connect)
    monkeypatch.setattr(Warehouse, "checkpoint", recording_checkpoint)
    reported: list[tuple[str, bool]] = []

    def on_namespace(outcome: NamespaceOutcome) -> None:
        reported.append((outcome.namespace_company_id, outcome.status == "success"))
        if outcome.namespace_company_id == fast:
            fast_committed.set()

    result = sync(sandbox, warehouse, namespaces=[fast, slow], on_namespace=on_namespace)

    assert not result.failed and [ns for ns, _ in reported] == [fast, slow]
    # the file is opened to check that no other process holds it, then once for the
    # whole sync, held from its start (its synced namespaces are read through it too):
    # dlt opens nothing of its own
    assert opened == [(str(warehouse), False), (str(warehouse), False)], opened
    # the WAL is written into the file after the fast namespace (the slow one was still
    # being read), not after the last one: that is left to the next open
    assert checkpoints == [[fast]]
    assert Path(f"{warehouse}.wal").exists()
    monkeypatch.undo()
    assert current_counts(warehouse) == current_counts(synced_small)  # a clean sync's


def test_the_destination_resolves_its_configuration_once_per_sync(
    sandbox: SandboxServer, warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # dlt asks for the destination's capabilities about a dozen times per run, and each
    # ask resolved the destination's whole configuration again (Python holding the GIL
    # the fetch thread needs); the sync's destination resolves it once per naming
    from dlt.destinations import duckdb as dlt_duckdb

    from diligence.warehouse.destination import DUCKDB_TYPE, DuckDbDestination

    resolved: list[bool] = []
    real_configuration = dlt_duckdb.configuration

    def counting_configuration(self: Any, initial_config: Any, accept_partial: bool = False) -> Any:
        resolved.append(accept_partial)
        return real_configuration(self, initial_config, accept_partial)

    monkeypatch.setattr(dlt_duckdb, "configuration", counting_configuration)
    result = sync(sandbox, warehouse)

    assert not result.failed and len(result.namespaces) == len(sandbox.world.namespaces) >= 2
    # for the capabilities (accept_partial): once per naming convention for the whole
    # sync; the full resolution dlt does once per load to make its client stays
    assert resolved.count(True) <= 2, resolved
    assert resolved.count(False) >= len(result.namespaces)
    # dlt records the same destination type as for its own factory
    destination = DuckDbDestination(str(warehouse))
    assert destination.destination_type == DUCKDB_TYPE == "dlt.destinations.duckdb"
    # each caller gets its own copy (dlt sets the file formats on what it gets)
    first = destination.capabilities()
    preferred = first.preferred_loader_file_format
    first.preferred_loader_file_format = "jsonl"
    assert destination.capabilities().preferred_loader_file_format == preferred != "jsonl"


def test_the_loads_run_under_a_small_bound_that_duckdb_gives_back(warehouse: Path) -> None:
    # the sync's one DuckDB lives for all its loads: its cache is bounded small, and its
    # allocator returns memory after each large task instead of keeping it (DuckDB's
    # default threshold is 128 MiB); a session without a bound keeps DuckDB's defaults
    from diligence.sync import LOAD_MEMORY_LIMIT

    owner = Warehouse(warehouse)

    def settings(con: Any) -> tuple[str, str]:
        return con.execute(
            "select current_setting('memory_limit'), current_setting('allocator_flush_threshold')"
        ).fetchone()

    with owner.writing():
        with owner.session(memory_limit=LOAD_MEMORY_LIMIT, threads=None) as con:
            assert settings(con) == ("61.0 MiB", "15.2 MiB")
        with owner.session(memory_limit=None) as con:
            limit, threshold = settings(con)
    assert threshold == "128.0 MiB" and limit != "61.0 MiB"


def test_each_namespace_loads_its_jobs_one_at_a_time_in_one_transaction(
    sandbox: SandboxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A namespace commits whole or not at all: dlt's load step runs its jobs one at a time
    # (in the calling thread) on the sync's own connection, inside one transaction; dlt
    # opens no transaction of its own and no duplicate of the connection.
    from dlt.load import Load

    workers: list[int] = []
    init = Load.__init__

    def recording(self: Load, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        workers.append(self.config.workers)  # what dlt's load step really runs with

    monkeypatch.setattr(Load, "__init__", recording)
    result = sync(sandbox, tmp_path / "w.duckdb")
    assert not result.failed and result.rows > 0
    assert workers == [1] * len(result.namespaces)
    with duckdb.connect(str(tmp_path / "w.duckdb"), read_only=True) as con:
        loads = con.execute("select count(*) from raw._dlt_loads").fetchone()[0]
    assert loads == len(result.namespaces)  # one dlt package, one commit, per namespace


def test_a_sync_keeps_no_copy_of_the_loaded_rows_in_dlts_folder(sandbox: SandboxServer, warehouse: Path) -> None:
    """dlt's job files are copies of the rows it committed: deleted once loaded (the
    packages' records stay), and the staged rows go with the sync's staging folder."""
    result = sync(sandbox, warehouse)
    assert not result.failed and result.rows > 0
    pipelines = pipelines_dir_of(warehouse)
    packages = list(pipelines.rglob("load_package_state.json"))
    assert len(packages) == len(result.namespaces)  # one loaded package per namespace
    left = sorted(str(p.relative_to(pipelines)) for p in pipelines.rglob("*") if p.is_file() and p.suffix in (".parquet", ".sql", ".jsonl", ".gz"))
    assert left == []
    assert query(warehouse, "select count(*) from raw.companies")[0][0] > 0
