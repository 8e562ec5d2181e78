"""The schedule fires, unattended: a real `prefect server start` with its scheduler, and
nothing triggered by hand.

Two ways users schedule the flow (docs/scheduling.md), both started before either is
waited on (so they share the wait for the minute's tick), then each waited on until the
server's scheduler has created a run and it has completed:

* `diligence schedule --cron '* * * * *'` (the flow served from the CLI, no work pool);
* `prefect deploy` of `prefect.yaml`'s `company-connections-daily` onto a process work
  pool, with `prefect worker start`.

Each run must load the sandbox into the warehouse the runner's settings name
(``DILIGENCE_WAREHOUSE``), with the expiry window they configure, exactly as the CLI
resolves them: not into ``data/warehouse.duckdb`` under the working folder.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterKey,
    DeploymentFilter,
    DeploymentFilterId,
)
from prefect.client.schemas.objects import FlowRun

from flows.company_connections_sync import DOCUMENTS_ARTIFACT_KEY, FLOW_NAME
from flows.serve import DEPLOYMENT_NAME
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.processes import PREFECT, REPO, base_env, prefect_server, start, stop, wait_for

pytestmark = pytest.mark.slow

#: From the deployment's creation to a completed scheduled run: the next minute's tick,
#: the runner's or worker's poll, and the run itself.
RUN_SECONDS = 180
EXPIRING_WITHIN_DAYS = 45


@pytest.fixture(scope="module")
def scheduling_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`prefect server start` with its default services, the scheduler among them."""
    with prefect_server(tmp_path_factory.mktemp("scheduling") / "home", services=True) as api_url:
        yield api_url


@pytest.fixture(scope="module")
def service() -> Iterator[SandboxServer]:
    with SandboxServer(scale="small") as server:
        yield server


def runner_env(home: Path, api_url: str, service: SandboxServer, warehouse: Path) -> dict[str, str]:
    """What a user's runner has: the Prefect API, the credentials, the configured warehouse."""
    return base_env(home) | {
        "PREFECT_API_URL": api_url,
        "SOURCES__COMPANY_CONNECTIONS__BASE_URL": service.base_url,
        "SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
        "SOURCES__COMPANY_CONNECTIONS__PASSWORD": DEFAULT_PASSWORD,
        "SOURCES__COMPANY_CONNECTIONS__EXPIRING_WITHIN_DAYS": str(EXPIRING_WITHIN_DAYS),
        "DILIGENCE_WAREHOUSE": str(warehouse),
    }


def first_finished_run(client: SyncPrefectClient, deployment: str) -> FlowRun | None:
    """The first run of `deployment` that reached a final state (None: none yet)."""
    try:
        found = client.read_deployment_by_name(deployment)
    except Exception:  # noqa: BLE001 - not registered yet
        return None
    runs = client.read_flow_runs(
        deployment_filter=DeploymentFilter(id=DeploymentFilterId(any_=[found.id]))
    )
    return next((run for run in runs if run.state is not None and run.state.is_final()), None)


def assert_scheduled_run_loaded(api_url: str, runner: Runner) -> None:
    """Wait for the first run of the runner's deployment that it (a `diligence schedule`
    or a Prefect worker) finished, check it with :func:`assert_loaded`, then stop it."""
    try:
        with SyncPrefectClient(api_url) as client:
            run = wait_for(
                f"a scheduled run of {runner.deployment}",
                lambda: first_finished_run(client, f"{FLOW_NAME}/{runner.deployment}"),
                runner.process, runner.log, RUN_SECONDS,
            )
            assert_loaded(run, client, runner.warehouse, runner.log)
    finally:
        stop(runner.process)


def assert_loaded(run: FlowRun, client: SyncPrefectClient, warehouse: Path, log: Path) -> None:
    """The run was made by the scheduler, completed, and filled the configured warehouse
    with the configured expiry window."""
    assert run.auto_scheduled, "the run was not created by the server's scheduler"
    assert run.state is not None and run.state.is_completed(), (
        f"{run.state!r}\n{log.read_text()[-3000:]}"
    )
    with duckdb.connect(str(warehouse), read_only=True) as con:
        loaded = con.execute(
            "select count(distinct namespace_company_id) from raw.sync_runs where status = 'success'"
        ).fetchone()[0]
        answers = con.execute("select count(*) from analytics.answers").fetchone()[0]
    assert (loaded, answers > 0) == (2, True)
    artifacts = client.read_artifacts(
        artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[DOCUMENTS_ARTIFACT_KEY]))
    )
    (artifact,) = [a for a in artifacts if a.flow_run_id == run.id]
    assert f"within {EXPIRING_WITHIN_DAYS} days" in (artifact.description or "")


@dataclass(frozen=True)
class Runner:
    """A runner started by a user: its process, its log, the warehouse it is configured
    with, and its working folder."""

    deployment: str
    process: subprocess.Popen[bytes]
    log: Path
    warehouse: Path
    workdir: Path


@pytest.fixture(scope="module")
def runners(scheduling_api: str, service: SandboxServer,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Runner]]:
    """Both ways, started one after the other, so that both wait for the same minute's
    tick (each test then waits for its own run): `diligence schedule` ("served"), and
    `prefect.yaml`'s deployment onto a process work pool with a worker ("pool")."""
    started: dict[str, Runner] = {}
    try:
        root = tmp_path_factory.mktemp("served")
        env = runner_env(root / "home", scheduling_api, service, root / "configured" / "warehouse.duckdb")
        diligence = Path(sys.executable).with_name("diligence")
        started["served"] = _start_runner(
            DEPLOYMENT_NAME, [str(diligence), "schedule", "--cron", "* * * * *", "--timezone", "UTC"],
            env, root)

        root = tmp_path_factory.mktemp("pool")
        env = runner_env(root / "home", scheduling_api, service, root / "configured" / "warehouse.duckdb")
        pool = "diligence-schedule-test"
        setup = [
            [str(PREFECT), "work-pool", "create", pool, "--type", "process"],
            [str(PREFECT), "--no-prompt", "deploy", "--name", "company-connections-daily", "--pool", pool,
             "--cron", "* * * * *", "--timezone", "UTC", "--param", f"reports_dir={root / 'reports'}"],
        ]
        for args in setup:  # from the checkout, as docs/scheduling.md says
            done = subprocess.run(args, cwd=REPO, env=env | {"PWD": str(REPO)}, capture_output=True,
                                  text=True, timeout=120)
            assert done.returncode == 0, f"{args[1:3]}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        started["pool"] = _start_runner(
            "company-connections-daily", [str(PREFECT), "worker", "start", "--pool", pool], env, root)
        yield started
    finally:  # those a test has not stopped already (a stopped one's group id may be reused)
        for runner in started.values():
            if runner.process.poll() is None:
                stop(runner.process)


def _start_runner(deployment: str, args: list[str], env: dict[str, str], root: Path) -> Runner:
    """`args` started in a working folder of its own under `root`, logging to `root`."""
    workdir = root / "runner"
    workdir.mkdir()
    log = root / "runner.log"
    return Runner(deployment, start(args, env, log, cwd=workdir), log,
                  Path(env["DILIGENCE_WAREHOUSE"]), workdir)


def test_diligence_schedule_fires_on_its_cron_into_the_configured_warehouse(
    scheduling_api: str, runners: dict[str, Runner]
) -> None:
    runner = runners["served"]
    assert_scheduled_run_loaded(scheduling_api, runner)
    assert not (runner.workdir / "data").exists(), "the run wrote the default warehouse, not the configured one"


def test_prefect_yaml_deployment_fires_on_a_worker_into_the_configured_warehouse(
    scheduling_api: str, runners: dict[str, Runner]
) -> None:
    assert_scheduled_run_loaded(scheduling_api, runners["pool"])
