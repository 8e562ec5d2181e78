"""Ctrl-C: a sync stops within 3 s, on a terminal and off it, says how many requests it
cancelled (cancelled, not failed), and no run leaves a stale ``<warehouse>.lock``.

The sandbox answers slowly (latency) so that the sync is mid-fetch when SIGINT arrives;
SIGINT is sent once the sandbox has served some requests, not after a fixed sleep.
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

#: Seconds from SIGINT to the process's exit that the promise allows.
EXIT_WITHIN = 3.0


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


def _interrupt_sync(server: SandboxServer, warehouse: Path, *, tty: bool) -> tuple[int, float, str]:
    """Start `diligence sync`, SIGINT it mid-fetch; (exit code, seconds to exit, output)."""
    args = [sys.executable, "-m", "diligence", "sync", "--base-url", server.base_url,
            "--warehouse", str(warehouse), "--max-concurrency", "4"]
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
        interrupted = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
        seconds = time.monotonic() - interrupted
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(timeout=10)
    if tty:
        os.close(controller)
    return code, seconds, b"".join(chunks).decode(errors="replace")


@pytest.mark.parametrize("tty", [False, True], ids=["no-terminal", "terminal"])
def test_ctrl_c_stops_the_sync_quickly_and_cleanly(tmp_path: Path, tty: bool) -> None:
    warehouse = tmp_path / "w.duckdb"
    with SandboxServer(scale="small") as server:
        server.faults.latency_ms = 250
        code, seconds, output = _interrupt_sync(server, warehouse, tty=tty)
        total = server.app.stats.total
        assert code == 130, output[-3000:]
        assert seconds < EXIT_WITHIN, f"exited {seconds:.1f} s after SIGINT"
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
