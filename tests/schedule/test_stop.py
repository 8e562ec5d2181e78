"""SIGTERM (what systemd, Docker and Kubernetes send to stop a service) stops the runners
of docs/scheduling.md cleanly: a run in flight ends within :data:`STOP_SECONDS` of the
signal, and `diligence schedule` exits 0 within them, with no traceback and no "coroutine
... was never awaited" printed and no process left behind.

* `diligence schedule` with no Prefect API configured, idle: Prefect's temporary server
  (a child process) goes with it, and nothing was sent to Prefect's telemetry;
* `diligence schedule` on a local `prefect server start`, with a run in flight: the run
  ends Cancelled, its process ends, the schedule is paused until served again;
* `prefect worker start` on a process pool of `prefect.yaml`'s deployment, with a run in
  flight, stopped as `systemctl stop` stops it (SIGTERM to each of its processes, SIGKILL
  to what is left at the stop timeout): the run's processes end within the bound. The
  worker itself usually exits 0 at once, but Prefect 3.8.8's worker has, under load,
  stayed in its event loop after its run had ended, which the stop timeout ends; to the
  worker alone, it has let the run finish, then waited on its process
  (docs/scheduling.md).

The sandbox answers each request after 3 s while a run is in flight, so that the run is
still syncing when the signal comes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.objects import Deployment, FlowRun

from flows.company_connections_sync import FLOW_NAME
from flows.serve import DEPLOYMENT_NAME
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.processes import (
    PREFECT,
    REPO,
    ProxyTrap,
    base_env,
    descendants,
    described,
    prefect_server,
    start,
    still_running,
    wait_for,
)

pytestmark = pytest.mark.slow

#: From SIGTERM to the exit of the process and of everything it started: seconds on a
#: quiet machine; the bound allows a loaded 2-core machine, on which the run in flight
#: may still be importing when its SIGINT arrives (one such stop took over 10 s in CI).
STOP_SECONDS = 30
#: How much longer a stop that took too long is watched, to tell a slow stop from a hang.
LATE_SECONDS = 60
STARTUP_SECONDS = 120
DILIGENCE = Path(sys.executable).with_name("diligence")
#: Output that a clean stop never prints.
NOISE = ("never awaited", "Traceback", "Failed to send telemetry")
#: first on the PYTHONPATH of the runners: SIGUSR1 writes a process's stacks to a file
STACKS_SITE = Path(__file__).resolve().parent / "stacks_site"


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with prefect_server(tmp_path_factory.mktemp("stop") / "server") as api_url:
        yield api_url


@pytest.fixture(scope="module")
def service() -> Iterator[SandboxServer]:
    with SandboxServer(scale="small") as server:
        yield server


def runner_env(home: Path, service: SandboxServer, api_url: str | None) -> dict[str, str]:
    """A user's runner: the credentials, the Prefect API if any, and Prefect's telemetry
    as our processes set it (not as the tests' processes do)."""
    env = base_env(home) | {
        "SOURCES__COMPANY_CONNECTIONS__BASE_URL": service.base_url,
        "SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
        "SOURCES__COMPANY_CONNECTIONS__PASSWORD": DEFAULT_PASSWORD,
    }
    del env["PREFECT_SERVER_ANALYTICS_ENABLED"]
    (home / "stacks").mkdir(parents=True, exist_ok=True)  # a stop that hangs shows them (stacks)
    env |= {"PYTHONPATH": str(STACKS_SITE), "STACKS_DIR": str(home / "stacks")}
    return env | ({"PREFECT_API_URL": api_url} if api_url else {})


def kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def kill_all(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL what is left of `process` and of what it started (after a failure)."""
    kill(descendants(process.pid) | ({process.pid} if process.poll() is None else set()))
    process.wait(timeout=30)


def stacks(process: subprocess.Popen[bytes], home: Path) -> str:
    """The Python stacks of every thread of what is left of `process` (SIGUSR1 to each,
    which :data:`STACKS_SITE` turns into a file per process), so that a stop that hangs
    says where."""
    pids = {process.pid} | descendants(process.pid)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGUSR1)
    time.sleep(2)  # the dumps are written by each process, at once but not atomically
    return "\n".join(f"--- {pid}\n{path.read_text()}" for pid in sorted(pids)
                     if (path := home / "stacks" / f"{pid}.txt").is_file() and path.stat().st_size)


def sigterm_and_wait(process: subprocess.Popen[bytes], log: Path, home: Path) -> float:
    """SIGTERM `process` alone (not its group); assert that it and every process it had
    started are gone within :data:`STOP_SECONDS`, that it exited 0 and printed none of
    :data:`NOISE`. Returns the seconds from the signal to the exit. `home`: the runner's
    (:func:`runner_env`)."""
    started = descendants(process.pid)
    signalled = time.monotonic()
    os.kill(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_SECONDS)
    except subprocess.TimeoutExpired:
        # still a failure; what is left running, and whether it ends at all, say where
        alive = described({process.pid} | descendants(process.pid))
        try:
            process.wait(timeout=LATE_SECONDS)
            late = f"it exited {time.monotonic() - signalled:.0f} s after SIGTERM"
        except subprocess.TimeoutExpired:
            hung = described({process.pid} | descendants(process.pid))
            late = (f"it was still running {STOP_SECONDS + LATE_SECONDS} s after SIGTERM:\n{hung}\n"
                    f"{stacks(process, home)}")
        pytest.fail(f"still running {STOP_SECONDS} s after SIGTERM ({late}):\n{alive}\n"
                    f"{log.read_text()[-8000:]}")
    stopped = time.monotonic() - signalled
    while (left := still_running(started, process.pid)) and time.monotonic() < signalled + STOP_SECONDS:
        time.sleep(0.2)
    output = log.read_text()
    if left:
        kill(left)
        pytest.fail(f"left running: {left}\n{output[-3000:]}")
    assert process.returncode == 0, output[-3000:]
    assert not [noise for noise in NOISE if noise in output], output[-3000:]
    return stopped


def systemctl_stop(process: subprocess.Popen[bytes], log: Path, home: Path) -> tuple[float, bool]:
    """Stop `process` as `systemctl stop` stops a service (its default
    KillMode=control-group): SIGTERM to it and to each process it started, then SIGKILL to
    what is left when the stop timeout (``TimeoutStopSec``, here :data:`STOP_SECONDS`) is
    up. Asserts that every process it had started (the run's) is gone within
    :data:`STOP_SECONDS` and that nothing printed :data:`NOISE`. Returns the seconds until
    those were gone, and whether `process` itself exited 0 before the timeout: Prefect
    3.8.8's worker has, on a loaded machine, stayed in its event loop after its run had
    ended, which the stop timeout is for (docs/scheduling.md)."""
    started = descendants(process.pid)
    signalled = time.monotonic()
    for pid in {process.pid} | started:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    while ((left := still_running(started, process.pid) - {process.pid})
           and time.monotonic() < signalled + STOP_SECONDS):
        time.sleep(0.2)
    gone = time.monotonic() - signalled
    if left:
        alive = f"{described(left)}\n{stacks(process, home)}"
        kill(left)
        pytest.fail(f"the run's processes still running {STOP_SECONDS} s after SIGTERM:\n{alive}\n"
                    f"{log.read_text()[-8000:]}")
    try:
        process.wait(timeout=max(signalled + STOP_SECONDS - time.monotonic(), 1))
    except subprocess.TimeoutExpired:
        process.kill()  # the stop timeout's SIGKILL
        process.wait(timeout=30)
    output = log.read_text()
    assert process.returncode in (0, -signal.SIGKILL), output[-3000:]
    assert not [noise for noise in NOISE if noise in output], output[-3000:]
    return gone, process.returncode == 0


def started_run(client: SyncPrefectClient, deployment: Deployment, root: Path,
                process: subprocess.Popen[bytes], log: Path) -> FlowRun:
    """A run of `deployment` made now, once its process is syncing (state Running)."""
    run = client.create_flow_run_from_deployment(
        deployment.id,
        parameters={"warehouse": str(root / "warehouse.duckdb"), "reports_dir": str(root / "reports")},
    )
    wait_for("the run to be running",
             lambda: (state := client.read_flow_run(run.id).state) is not None and state.is_running(),
             process, log, STARTUP_SECONDS)
    assert descendants(process.pid), "the run's process is not a child of the runner"
    return run


def read_deployment(client: SyncPrefectClient, name: str) -> Deployment | None:
    try:
        return client.read_deployment_by_name(name)
    except Exception:  # noqa: BLE001 - not registered yet
        return None


@pytest.fixture
def slow_service(service: SandboxServer) -> Iterator[SandboxServer]:
    """The sandbox answering every request after 3 s."""
    service.faults.latency_ms = 3000
    try:
        yield service
    finally:
        service.faults.latency_ms = 0


def test_sigterm_stops_diligence_schedule_and_its_temporary_server(
    service: SandboxServer, tmp_path: Path
) -> None:
    log = tmp_path / "schedule.log"
    with ProxyTrap() as proxy:
        # the subject is the stop, not how fast a loaded machine starts Prefect's server
        env = runner_env(tmp_path / "home", service, None) | proxy.env | {
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120"}
        process = start([str(DILIGENCE), "schedule"], env, log, cwd=tmp_path)
        try:
            wait_for("the runner to start", lambda: "polling for scheduled runs" in log.read_text(),
                     process, log, STARTUP_SECONDS)
            assert descendants(process.pid), "no temporary server"
            seconds = sigterm_and_wait(process, log, tmp_path / "home")
        finally:
            kill_all(process)
    assert proxy.targets == [], "something was sent out (Prefect's telemetry?)"
    print(f"stopped {seconds:.1f} s after SIGTERM")


def test_sigterm_stops_diligence_schedule_and_cancels_the_run_in_flight(
    prefect_api: str, slow_service: SandboxServer, tmp_path: Path
) -> None:
    log = tmp_path / "schedule.log"
    env = runner_env(tmp_path / "home", slow_service, prefect_api)
    process = start([str(DILIGENCE), "schedule"], env, log, cwd=tmp_path)
    try:
        with SyncPrefectClient(prefect_api) as client:
            name = f"{FLOW_NAME}/{DEPLOYMENT_NAME}"
            deployment = wait_for("the deployment", lambda: read_deployment(client, name),
                                  process, log, STARTUP_SECONDS)
            run = started_run(client, deployment, tmp_path, process, log)
            seconds = sigterm_and_wait(process, log, tmp_path / "home")
            state = client.read_flow_run(run.id).state
            assert state is not None and state.is_cancelled(), state
            assert client.read_deployment(deployment.id).paused
    finally:
        kill_all(process)
    print(f"stopped {seconds:.1f} s after SIGTERM, the run {state.name}")


def test_sigterm_stops_a_process_worker_and_its_run_in_flight(
    prefect_api: str, slow_service: SandboxServer, tmp_path: Path
) -> None:
    env = runner_env(tmp_path / "home", slow_service, prefect_api)
    pool = "diligence-stop-test"
    for args in ([str(PREFECT), "work-pool", "create", pool, "--type", "process"],
                 [str(PREFECT), "--no-prompt", "deploy", "--name", "company-connections-daily",
                  "--pool", pool]):  # from the checkout, as docs/scheduling.md says
        done = subprocess.run(args, cwd=REPO, env=env | {"PWD": str(REPO)}, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, f"{args[1:3]}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    log = tmp_path / "worker.log"
    process = start([str(PREFECT), "worker", "start", "--pool", pool], env, log, cwd=tmp_path)
    try:
        with SyncPrefectClient(prefect_api) as client:
            deployment = client.read_deployment_by_name(f"{FLOW_NAME}/company-connections-daily")
            run = started_run(client, deployment, tmp_path, process, log)
            seconds, exited = systemctl_stop(process, log, tmp_path / "home")
            state = client.read_flow_run(run.id).state
    finally:
        kill_all(process)
    print(f"the run's processes ended {seconds:.1f} s after SIGTERM, the run left "
          f"{state.name if state else None}; the worker "
          f"{'exited 0' if exited else f'was still running after {STOP_SECONDS} s (SIGKILL)'}")
