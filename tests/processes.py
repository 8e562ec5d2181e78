"""The real processes of the tests that need them (a local Prefect server, its workers,
`diligence schedule`): each in its own process group, on loopback, stopped by PID; what
is left of a process tree (:func:`still_running`); a loopback receiver of what a process
posts (:class:`Receiver`), and a proxy that lets nothing out (:class:`ProxyTrap`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]
PREFECT = Path(sys.executable).with_name("prefect")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def base_env(home: Path) -> dict[str, str]:
    """This process's environment without Prefect, dlt-source and diligence settings,
    `home` as PREFECT_HOME."""
    prefixes = ("PREFECT_", "SOURCES__", "SCHEDULE__", "NOTIFICATIONS__", "DILIGENCE_")
    env = {key: value for key, value in os.environ.items() if not key.startswith(prefixes)}
    env.update(
        PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", PYTHONUNBUFFERED="1"
    )
    return env


def start(
    args: list[str], env: dict[str, str], log: Path, *, cwd: Path = REPO
) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            args, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    """End the process and everything it started (its own process group), by its PID."""
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


def kill_when(process: subprocess.Popen[Any], moment: Callable[[], bool], *, seconds: float = 120) -> None:
    """SIGKILL `process` once `moment()` is true (polled every 5 ms); fails if the
    process ends first or the moment does not come within `seconds`."""
    deadline = time.monotonic() + seconds
    try:
        while not moment():
            assert process.poll() is None, "the process finished before it could be killed"
            assert time.monotonic() < deadline, "the moment to kill never came"
            time.sleep(0.005)
    finally:
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


def wait_for(
    what: str, check: Callable[[], Any], process: subprocess.Popen[bytes], log: Path,
    timeout: float,
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{what}: exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        try:
            result = check()
        except (httpx.HTTPError, OSError):
            result = None
        if result:
            return result
        time.sleep(0.5)
    pytest.fail(f"{what}: timed out after {timeout} s:\n{log.read_text()[-3000:]}")


@contextlib.contextmanager
def prefect_server(home: Path, *, startup_seconds: float = 120, services: bool = False) -> Iterator[str]:
    """`prefect server start` on a free loopback port with its SQLite database, its log
    (``server.log``) and everything else it writes in `home`; yields the API URL.

    With `services`, the server runs every service it runs by default, the scheduler
    included, as `prefect server start` does for a user (docs/scheduling.md)."""
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    env = base_env(home) | {
        "PREFECT_SERVER_API_HOST": "127.0.0.1",
        "PREFECT_SERVER_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{home / 'prefect.db'}",
        "PREFECT_UI_ENABLED": "false",
    }
    if not services:
        # Services the tests that trigger their runs by hand do not use: schedules (the
        # scheduler would insert the deployments' future runs), late runs, worker
        # health, pauses and automations (which read every event).
        env |= {f"PREFECT_SERVER_SERVICES_{service}_ENABLED": "false"
                for service in ("SCHEDULER", "LATE_RUNS", "FOREMAN", "PAUSE_EXPIRATIONS", "TRIGGERS")}
    log = home / "server.log"
    process = start([str(PREFECT), "server", "start", "--host", "127.0.0.1", "--port", str(port)], env, log)
    api_url = f"http://127.0.0.1:{port}/api"
    try:
        wait_for(
            "prefect server", lambda: httpx.get(f"{api_url}/health", timeout=2).status_code == 200,
            process, log, startup_seconds,
        )
        yield api_url
    finally:
        stop(process)


def _stat(pid: int) -> tuple[str, int, int] | None:
    """State, parent PID and process group of `pid` (None: no such process)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid, pgrp = text.rpartition(")")[2].split()[:3]
    return state, int(ppid), int(pgrp)


def _processes() -> dict[int, tuple[str, int, int]]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            found[int(entry.name)] = stat
    return found


def descendants(pid: int) -> set[int]:
    """Every process below `pid` now: its children, theirs, and so on."""
    children: dict[int, list[int]] = {}
    for child, (_, ppid, _) in _processes().items():
        children.setdefault(ppid, []).append(child)
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def described(pids: set[int]) -> str:
    """One line per process of `pids` still there: its PID, state, what it waits in (the
    kernel's wchan) and its command line; what a test that timed out on a stop shows, so
    that the process that did not end is named."""
    lines = []
    for pid in sorted(pids):
        stat = _stat(pid)
        if stat is None:
            continue
        try:
            wchan = Path(f"/proc/{pid}/wchan").read_text()
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        lines.append(f"{pid} {stat[0]} {wchan or '-'} {command.strip()[:200]}")
    return "\n".join(lines) or "(none)"


def still_running(pids: set[int], group: int) -> set[int]:
    """Those of `pids`, and of the members of process group `group`, that have not exited
    (a zombie has: only its exit status is left for a parent to collect)."""
    return {pid for pid, (state, _, pgrp) in _processes().items()
            if (pid in pids or pgrp == group) and state != "Z"}


class _LocalServer:
    """An HTTP server on 127.0.0.1 serving `handler` in a thread while the block runs."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.timeout = 1
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1})

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


class Receiver(_LocalServer):
    """An HTTP receiver on 127.0.0.1 that keeps every JSON body posted to it (a webhook,
    a telemetry endpoint)."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []
        received = self.payloads

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("content-length") or 0)
                received.append(json.loads(self.rfile.read(length)))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)
        self.url = f"{self.base_url}/hook"


class ProxyTrap(_LocalServer):
    """An HTTPS proxy on 127.0.0.1 that forwards nothing: a process with :attr:`env` asks
    it for every HTTPS connection it opens beyond loopback (a ``CONNECT host:port``, kept
    in :attr:`targets`), and is refused."""

    def __init__(self) -> None:
        self.targets: list[str] = []
        targets = self.targets

        class Handler(BaseHTTPRequestHandler):
            def do_CONNECT(self) -> None:  # noqa: N802 - http.server's name
                targets.append(self.path)
                self.send_response(403)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)
        self.url = self.base_url
        #: the variables that send a process's HTTPS (and WebSocket) traffic here
        self.env = {"HTTPS_PROXY": self.url, "NO_PROXY": "127.0.0.1,localhost"}
