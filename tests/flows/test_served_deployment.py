"""The served deployment on a real local Prefect server: `prefect server start` and
`diligence schedule` as subprocesses, a run triggered through the Prefect client."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.objects import Deployment

from flows.serve import DEPLOYMENT_NAME
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.processes import base_env, start, stop, wait_for

pytestmark = pytest.mark.slow

FLOW_NAME = "company-connections-sync"
CRON = "15 4 * * 1-5"
TIMEZONE = "Europe/Zurich"
STARTUP_SECONDS = 120
RUN_SECONDS = 180


@pytest.fixture
def prefect_api(prefect_server_api: str) -> str:
    """The session's Prefect server (a free loopback port, its own home and SQLite database)."""
    return prefect_server_api


@pytest.fixture
def served(
    prefect_api: str, shared_sandbox: SandboxServer, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """`diligence schedule` (= `python -m flows.serve`) with the schedule and the credentials
    in its environment."""
    env = base_env(tmp_path / "serve-home") | {
        "PREFECT_API_URL": prefect_api,
        "SOURCES__COMPANY_CONNECTIONS__BASE_URL": shared_sandbox.base_url,
        "SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
        "SOURCES__COMPANY_CONNECTIONS__PASSWORD": DEFAULT_PASSWORD,
        "SCHEDULE__CRON": CRON,
        "SCHEDULE__TIMEZONE": TIMEZONE,
    }
    log = tmp_path / "serve.log"
    process = start([sys.executable, "-m", "diligence", "schedule"], env, log)
    try:
        yield process, log
    finally:
        stop(process)


def test_served_deployment_runs_on_a_real_server(
    prefect_api: str, served: tuple[subprocess.Popen[bytes], Path], tmp_path: Path
) -> None:
    process, log = served
    warehouse = tmp_path / "warehouse.duckdb"
    with SyncPrefectClient(prefect_api) as client:

        def deployment() -> Deployment | None:
            try:
                return client.read_deployment_by_name(f"{FLOW_NAME}/{DEPLOYMENT_NAME}")
            except Exception:  # noqa: BLE001 - not registered yet
                return None

        served_deployment = wait_for("deployment", deployment, process, log, STARTUP_SECONDS)
        (schedule,) = served_deployment.schedules
        assert schedule.active
        assert (schedule.schedule.cron, schedule.schedule.timezone) == (CRON, TIMEZONE)
        assert served_deployment.work_pool_name is None

        flow_run = client.create_flow_run_from_deployment(
            served_deployment.id,
            parameters={
                "warehouse": str(warehouse),
                "reports_dir": str(tmp_path / "reports"),
                "export_formats": ["csv"],
            },
        )
        final = wait_for(
            "flow run",
            lambda: (
                (state := client.read_flow_run(flow_run.id).state) and state.is_final() and state
            ),
            process,
            log,
            RUN_SECONDS,
        )

    assert final.is_completed(), f"{final!r}\n{log.read_text()[-3000:]}"
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("select count(*) from analytics.answers").fetchone()[0] > 0
        assert con.execute("select count(*) from analytics.document_expiry").fetchone()[0] > 0
