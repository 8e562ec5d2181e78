"""The fan-out deployment on real parts: a PostgreSQL catalog, a bucket (moto on
127.0.0.1) holding the lake's Parquet files and the evidence store, a local Prefect
server, the deployments of prefect.yaml, and two process workers, each with its own HOME
and the bucket's standard variables. The parent run fans out one run per namespace, each
taken by one of the workers, then builds the analytics once; the lake's analytics equal
a file warehouse's built from the same sandbox, and its rows are in the bucket. (The same
namespace syncs and model build, run twice on one lake, add nothing the second time:
test_lake_cli; the lake on a local folder: test_lake_cli, test_lake_resume.)"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterParentFlowRunId

from diligence.analytics import rebuild_analytics
from diligence.warehouse import lake
from diligence.warehouse.location import WarehouseLocation, parse_location
from flows.fanout import FANOUT_FLOW_NAME, NAMESPACE_FLOW_NAME
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.helpers import sync
from tests.processes import PREFECT, REPO, base_env, start, stop, wait_for

from .objectstore import ObjectStore
from .test_lake_cli import analytics_rows

pytestmark = pytest.mark.slow

POOL = "diligence-pool"
RUN_SECONDS = 420


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(scale="small") as sandbox:
        yield sandbox


@pytest.fixture
def prefect_api(prefect_server_api: str) -> str:
    """The session's Prefect server (a free loopback port, its own home and SQLite database)."""
    return prefect_server_api


def _cli(args: list[str], env: dict[str, str]) -> None:
    done = subprocess.run([str(PREFECT), "--no-prompt", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])


@pytest.mark.timeout(1200)
def test_fanout_over_two_workers_into_a_lake_in_a_bucket(
    prefect_api: str, server: SandboxServer, lake_location: WarehouseLocation, tmp_path: Path,
    bucket: ObjectStore, monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable, value in bucket.env().items():  # this process reads the lake too
        monkeypatch.setenv(variable, value)
    lake_location = parse_location(lake_location.uri, bucket.url("fanout/lake"))
    evidence = bucket.url("fanout/evidence")
    env = base_env(tmp_path / "client-home") | {"PREFECT_API_URL": prefect_api,
                                                 "PWD": str(REPO)}
    _cli(["work-pool", "create", POOL, "--type", "process"], env)
    _cli(["deploy", "--prefect-file", str(REPO / "prefect.yaml"),
          "--name", "company-connections-fanout", "--name", "company-connections-namespace"],
         env)

    workers = []
    try:
        for name in ("worker-1", "worker-2"):
            worker_env = base_env(tmp_path / f"{name}-home") | {
                "PREFECT_API_URL": prefect_api,
                "SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
                "SOURCES__COMPANY_CONNECTIONS__PASSWORD": DEFAULT_PASSWORD,
                "DILIGENCE_EVIDENCE": evidence,
                **bucket.env(),
            }
            log = tmp_path / f"{name}.log"
            workers.append((start([str(PREFECT), "worker", "start", "--pool", POOL, "--type",
                                   "process", "--name", name, "--limit", "3"],
                                  worker_env, log), log))

        parameters = {
            "warehouse": lake_location.uri,
            "data_path": lake_location.data_path,
            "reports_dir": str(tmp_path / "reports"),
            "base_url": server.base_url,
            "pipelines_dir": str(tmp_path / "pipelines"),
        }
        with SyncPrefectClient(prefect_api) as client:
            deployment = client.read_deployment_by_name(
                f"{FANOUT_FLOW_NAME}/company-connections-fanout")
            run = client.create_flow_run_from_deployment(deployment.id, parameters=parameters)
            worker, log = workers[0]

            def final() -> object:
                state = client.read_flow_run(run.id).state
                return state if state is not None and state.is_final() else None

            state = wait_for("fan-out run", final, worker, log, RUN_SECONDS)
            logs = "".join(w_log.read_text()[-3000:] for _, w_log in workers)
            assert state.is_completed(), (state.message, logs)
            children = client.read_flow_runs(flow_run_filter=FlowRunFilter(
                parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[run.id])))
            namespace_runs = [c for c in children if c.name.startswith("namespace-")]
            assert len(namespace_runs) == 2
            assert all(c.state is not None and c.state.is_completed() for c in namespace_runs)
            assert {c.parameters["namespace"] for c in namespace_runs} == set(
                server.truth()["namespaces"])
            flows = {client.read_flow(c.flow_id).name for c in namespace_runs}
            assert flows == {NAMESPACE_FLOW_NAME}
            # every run (the parent and its children) was executed by one of the two workers
            worker_logs = "".join(w_log.read_text() for _, w_log in workers)
            for run_id in [run.id, *(c.id for c in namespace_runs)]:
                assert str(run_id) in worker_logs
    finally:
        for process, _ in workers:
            stop(process)

    reference = tmp_path / "reference.duckdb"
    sync(server, reference)
    rebuild_analytics(reference)
    with duckdb.connect(str(reference), read_only=True) as con:
        expected = analytics_rows(con)
    con = lake.connect(lake_location, read_only=True)
    try:
        actual = analytics_rows(con)
        runs = con.execute(
            "select namespace_company_id, count(*) from raw.sync_runs group by 1").fetchall()
    finally:
        con.close()
    assert sorted(n for _, n in runs) == [1, 1]  # two namespaces, synced once each
    assert set(actual) == set(expected)
    for table in expected:
        assert actual[table] == expected[table], table
    assert list((tmp_path / "reports").rglob("report.html"))
    assert [key for key in bucket.keys("fanout/lake/") if key.endswith(".parquet")]
    assert not list(tmp_path.rglob("ducklake-*.parquet"))  # the lake's files: none on a disk
    sealed = [key for key in bucket.keys("fanout/evidence/syncs/") if key.endswith(".manifest.gz")]
    assert len(sealed) == 2  # one chain in the bucket: each namespace's run sealed its sync
    found = subprocess.run(["grep", "-rl", "--binary-files=text", bucket.secret, str(tmp_path)],
                           capture_output=True, text=True)  # workers' logs, homes, reports
    assert found.stdout == "", f"the secret key is in {found.stdout}"
