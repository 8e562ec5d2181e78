"""Ctrl-C: a sync stops at once, on a terminal and off it, says how many requests it
cancelled (cancelled, not failed), and no run leaves a stale ``<warehouse>.lock``.

The sandbox answers slowly (latency) so that the sync is mid-fetch when SIGINT arrives;
SIGINT is sent once the sandbox has served some requests, not after a fixed sleep, and
once requests are in flight that the sandbox holds for 20 s: a sync that waited for them
would take that long. What stopping costs is measured where the machine's load cannot
blur it: the CPU the process used from SIGINT to its exit (about 0.6 s: cancelling, then
the interpreter's own exit), and the wall time from the moment the kernel delivered the
signal. On an idle machine it stops within 0.6 s; the suite's bound is the one a 2-core
machine running three test workers meets. The sync runs with ``--no-models``: otherwise
the process its models build in starts beside the fetch (dbt's imports and parse, about
4 CPU s of its own), and its start-up would weigh on the machine the stop is measured
on. The sync ends that process when it stops (``test_dbt_warm_up``).
"""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.cli.helpers import run
from tests.helpers import current_counts, query, sync

pytestmark = pytest.mark.slow

#: Seconds from the delivery of SIGINT to the process's exit: far less than the 20 s the
#: requests in flight are held, on a machine as loaded as a parallel test suite makes it.
EXIT_WITHIN = 8.0
#: CPU seconds the process may use from SIGINT to its exit (0.4-0.65 when measured).
EXIT_CPU_SECONDS = 1.5
#: Latency of the requests in flight when SIGINT is sent (ms).
HELD_MS = 20_000


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCES__")}
    env.update(
        SOURCES__COMPANY_CONNECTIONS__EMAIL=DEFAULT_EMAIL,
        SOURCES__COMPANY_CONNECTIONS__PASSWORD=DEFAULT_PASSWORD,
        COLUMNS="200",
    )
    return env


@pytest.fixture(autouse=True)
def _ctrl_c_reaches_children() -> Iterator[None]:
    """The children take Ctrl-C as a terminal gives it, also when this test run was
    started in the background: a shell starts background jobs with SIGINT ignored, and
    an ignored signal stays ignored across exec (Python then installs no handler for
    it). A handled signal is reset to the default at exec, so handle it here."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _locks(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.lock"))


def _cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) `pid` has used so far, also once it has exited and
    is not yet reaped."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _until_delivered(pid: int, signum: int) -> float:
    """When the kernel delivered `signum` to `pid` (it left the pending sets): the moment
    the process was scheduled to take it, whatever the machine's load before that."""
    bit = 1 << (signum - 1)
    while True:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except FileNotFoundError:
            return time.monotonic()
        pending = 0
        for line in status.splitlines():
            if line.startswith(("SigPnd:", "ShdPnd:")):
                pending |= int(line.split()[1], 16)
        if not pending & bit:
            return time.monotonic()
        time.sleep(0.001)


def _interrupt_sync(server: SandboxServer, warehouse: Path, *, tty: bool) -> tuple[int, float, float, str]:
    """Start `diligence sync`, SIGINT it mid-fetch, with requests in flight held for
    HELD_MS; (exit code, seconds from delivery to exit, CPU seconds from SIGINT to exit,
    output)."""
    args = [sys.executable, "-m", "diligence", "sync", "--base-url", server.base_url,
            "--warehouse", str(warehouse), "--max-concurrency", "4", "--no-models"]
    chunks: list[bytes] = []
    if tty:
        controller, terminal = pty.openpty()
        proc = subprocess.Popen(args, env=_env(), stdin=terminal, stdout=terminal, stderr=terminal,
                                close_fds=True)
        os.close(terminal)

        def read() -> None:
            while True:
                try:
                    chunk = os.read(controller, 65536)
                except OSError:  # EIO: the child closed the terminal
                    return
                if not chunk:
                    return
                chunks.append(chunk)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
    else:
        proc = subprocess.Popen(args, env=_env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)  # type: ignore[union-attr]
        reader.start()
    try:
        started = time.monotonic()
        while server.app.stats.total < 30:  # logged in, user-info read, children in flight
            assert proc.poll() is None, b"".join(chunks).decode(errors="replace")
            assert time.monotonic() - started < 120, "the sync never started fetching"
            time.sleep(0.02)
        server.faults.latency_ms = HELD_MS
        time.sleep(0.5)  # the requests of 250 ms have answered: those in flight now are held
        while server.app.stats.in_flight < 2:
            assert proc.poll() is None, b"".join(chunks).decode(errors="replace")
            time.sleep(0.01)
        cpu_before = _cpu_seconds(proc.pid)
        proc.send_signal(signal.SIGINT)
        delivered = _until_delivered(proc.pid, signal.SIGINT)
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped
        seconds = time.monotonic() - delivered
        cpu = _cpu_seconds(proc.pid) - cpu_before
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    if tty:
        os.close(controller)
    return code, seconds, cpu, b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("tty", [False, True], ids=["no-terminal", "terminal"])
def test_ctrl_c_stops_the_sync_quickly_and_cleanly(tmp_path: Path, tty: bool) -> None:
    warehouse = tmp_path / "w.duckdb"
    with SandboxServer(scale="small") as server:
        server.faults.latency_ms = 250
        code, seconds, cpu, output = _interrupt_sync(server, warehouse, tty=tty)
        total = server.app.stats.total
        assert code == 130, output[-3000:]
        assert seconds < EXIT_WITHIN, f"exited {seconds:.1f} s after SIGINT was delivered"
        assert cpu < EXIT_CPU_SECONDS, f"used {cpu:.2f} s of CPU to stop"
        assert total < 400, "the sync was not mid-fetch: it read everything"
        # cancelled requests are counted as cancelled, never as failures
        match = re.search(r"interrupted: (\d+) requests? cancelled", output)
        assert match and int(match.group(1)) > 0, output[-3000:]
        assert "FAILED" not in output and "failed" not in output.lower(), output[-3000:]
        assert not _locks(tmp_path), "a stale lock file was left"
        # nothing half-written: the next sync runs and ends exactly like a clean run
        server.faults.latency_ms = 0
        result = sync(server, warehouse)
        clean = tmp_path / "clean.duckdb"
        assert not sync(server, clean).failed
    assert not result.failed
    assert query(warehouse, "select count(*) from raw.sync_runs where status <> 'success'") == [(0,)]
    assert current_counts(warehouse) == current_counts(clean), "rows lost or duplicated"
    assert not _locks(tmp_path)


def test_no_lock_file_is_left_after_success_or_failure(tmp_path: Path) -> None:
    warehouse = tmp_path / "w.duckdb"
    with SandboxServer(scale="small") as server:
        assert not sync(server, warehouse).failed
        assert not _locks(tmp_path)
        failed = run(["sync", "--base-url", server.base_url, "--warehouse", str(warehouse)],
                     tmp_path, {"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
                                "SOURCES__COMPANY_CONNECTIONS__PASSWORD": "wrong"})
        assert failed.returncode == 1, failed.stderr
    assert not _locks(tmp_path)


def test_the_lock_still_excludes_a_second_writer_once_files_are_removed(tmp_path: Path) -> None:
    """Removing the lock file on release must not let two writers in at once: a writer
    that opened the old file before it was removed takes the lock on a fresh file."""
    warehouse = tmp_path / "w.duckdb"
    # real writers are processes: three of them take turns, 40 times each
    script = (
        "import sys, time\nfrom pathlib import Path\nfrom diligence.warehouse import writer_lock\n"
        "w = Path(sys.argv[1]); log = Path(sys.argv[2])\n"
        "for i in range(40):\n"
        "    with writer_lock(w, wait_seconds=60):\n"
        "        with log.open('a') as f: f.write('in\\n')\n"
        "        time.sleep(0.002)\n"
        "        with log.open('a') as f: f.write('out\\n')\n"
    )
    log = tmp_path / "log"
    procs = [subprocess.Popen([sys.executable, "-c", script, str(warehouse), str(log)]) for _ in range(3)]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    lines = log.read_text().split()
    assert len(lines) == 3 * 40 * 2
    assert lines == ["in", "out"] * (3 * 40), "two writers held the lock at once"
    assert not _locks(tmp_path)


def test_a_signal_in_dlts_normalize_or_load_acts_at_once_and_a_ctrl_c_there_stays_one(
    tmp_path: Path, sandbox: SandboxServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """dlt would hold a SIGINT or SIGTERM that comes during its normalize or load until
    the step's next pass, and forget it when the step ends: the stop of a Prefect worker
    landing there was lost, and the worker waited on a sync that ran on. A sync's steps
    never hand the signals to dlt; a Ctrl-C inside one of dlt's steps (which wraps it in
    its step's error) still ends the sync as a Ctrl-C, and the next sync loads it all."""
    from dlt.common.runtime.signals import _signal_receiver
    from dlt.normalize import Normalize

    warehouse = tmp_path / "w.duckdb"

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(Normalize, "run", interrupted)
        with pytest.raises(KeyboardInterrupt):
            sync(sandbox, warehouse)

    held: set[str] = set()
    syncing = threading.Event()

    def watch() -> None:  # the handlers, every millisecond (dlt's steps take tens of them)
        while not syncing.wait(0.001):
            for signum in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(signum) is _signal_receiver:
                    held.add(signal.Signals(signum).name)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = sync(sandbox, warehouse)
    finally:
        syncing.set()
        watcher.join()
    assert not result.failed and len(result.namespaces) == 2
    assert held == set(), f"dlt held {held} during the sync"
    assert current_counts(warehouse)["connections"]  # everything was loaded
