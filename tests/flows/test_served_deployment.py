"""The served deployment on a real local Prefect server: `prefect server start` and
`diligence schedule` as subprocesses, a run triggered through the Prefect client."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import httpx
import pytest
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.objects import Deployment

from diligence.sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from flows.serve import DEPLOYMENT_NAME

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
PREFECT = Path(sys.executable).with_name("prefect")
FLOW_NAME = "company-connections-sync"
CRON = "15 4 * * 1-5"
TIMEZONE = "Europe/Zurich"
STARTUP_SECONDS = 120
RUN_SECONDS = 180


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def base_env(home: Path) -> dict[str, str]:
    """This process's environment without its Prefect, dlt-source and schedule settings."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PREFECT_", "SOURCES__", "SCHEDULE__"))
    }
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        PYTHONUNBUFFERED="1",
    )
    return env


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            args, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    """End the process and everything it started (its own process group)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # leftovers of the group, e.g. a flow run
    except ProcessLookupError:
        pass
    process.wait(timeout=15)


def wait_for(
    what: str, check: Callable[[], Any], process: subprocess.Popen[bytes], log: Path, timeout: float
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(
                f"{what}: process exited ({process.returncode}):\n{log.read_text()[-3000:]}"
            )
        try:
            result = check()
        except (httpx.HTTPError, OSError):
            result = None
        if result:
            return result
        time.sleep(0.5)
    pytest.fail(f"{what}: timed out after {timeout} s:\n{log.read_text()[-3000:]}")


@pytest.fixture
def prefect_api(tmp_path: Path) -> Iterator[str]:
    """A Prefect server on a free loopback port, with its own home and SQLite database."""
    port = free_port()
    env = base_env(tmp_path / "server-home") | {
        "PREFECT_SERVER_API_HOST": "127.0.0.1",
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": (
            f"sqlite+aiosqlite:///{tmp_path / 'prefect-server.db'}"
        ),
        "PREFECT_UI_ENABLED": "false",
    }
    log = tmp_path / "prefect-server.log"
    args = [str(PREFECT), "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    server = start(args, env, log)
    api_url = f"http://127.0.0.1:{port}/api"
    try:
        wait_for(
            "prefect server",
            lambda: httpx.get(f"{api_url}/health", timeout=2).status_code == 200,
            server,
            log,
            STARTUP_SECONDS,
        )
        yield api_url
    finally:
        stop(server)


@pytest.fixture
def served(
    prefect_api: str, sandbox: SandboxServer, tmp_path: Path
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """`diligence schedule` (= `python -m flows.serve`) with the schedule and the credentials
    in its environment."""
    env = base_env(tmp_path / "serve-home") | {
        "PREFECT_API_URL": prefect_api,
        "SOURCES__COMPANY_CONNECTIONS__BASE_URL": sandbox.base_url,
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
