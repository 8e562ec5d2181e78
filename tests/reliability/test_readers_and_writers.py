"""Readers (`status`, `export`, `verify`) and writers (a sync, a model build) of one
warehouse file: a reader holds the lock shared while its session is open, so it never
opens the file between two steps of a sync (DuckDB would then lock the sync out of its
own file), and a sync that starts while a reader reads waits for it.

The lock's other side is in another process, as it is for users: ``flock`` excludes
open files, and a process's own writer lock lets its own readers through."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from diligence.cli.status import collect_status
from diligence.warehouse import Warehouse, WarehouseBusyError
from diligence.warehouse.lock import lock_holder, lock_path, reader_lock
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.processes import REPO

pytestmark = pytest.mark.slow

#: a process that takes the writer lock (waiting up to 60 s), says "locked <seconds
#: waited>", and holds it until its stdin closes
WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import diligence.warehouse.lock as lock
    lock.READERS_GRACE_SECONDS = float(sys.argv[2])
    if sys.argv[3] == "no-proc-locks":  # as on a system without /proc/locks
        lock._flocks = lambda path: None
    asked = time.monotonic()
    try:
        with lock.writer_lock(Path(sys.argv[1]), wait_seconds=0):
            print(f"locked {time.monotonic() - asked:.2f}", flush=True)
            sys.stdin.read()
    except Exception as exc:
        print(f"refused {exc}", flush=True)
""")


def _writer(warehouse: Path, grace: float = 30.0, proc_locks: bool = True) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(warehouse), str(grace),
                             "proc-locks" if proc_locks else "no-proc-locks"], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _wait_for(condition: Callable[[], bool], seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_reader_is_refused_while_a_sync_writes_and_a_sync_waits_for_a_reader(tmp_path: Path) -> None:
    warehouse = tmp_path / "w.duckdb"
    writer = _writer(warehouse)
    try:
        assert writer.stdout.readline().startswith("locked")  # type: ignore[union-attr]
        assert lock_holder(warehouse) == writer.pid
        with pytest.raises(WarehouseBusyError, match=rf"is being written by diligence sync \(pid {writer.pid}\); "
                                                     "query the analysts' copy"):
            with reader_lock(warehouse):
                pass
    finally:
        writer.communicate("", timeout=30)
    assert not lock_path(warehouse).exists()

    with reader_lock(warehouse):  # the writer comes while this reader reads
        writer = _writer(warehouse)
        _wait_for(lambda: lock_holder(warehouse) == writer.pid)  # it waits, and says so
        with pytest.raises(WarehouseBusyError, match=rf"\(pid {writer.pid}\)"):
            with reader_lock(warehouse):  # a reader coming now is refused: the writer is next
                pass
        time.sleep(1.0)
    line = writer.stdout.readline()  # type: ignore[union-attr]
    writer.communicate("", timeout=30)
    assert line.startswith("locked") and 0.9 <= float(line.split()[1]) < 30, line
    assert not lock_path(warehouse).exists()


@pytest.mark.parametrize("proc_locks", [True, False], ids=["proc-locks", "no-proc-locks"])
def test_a_writer_gives_up_on_a_reader_past_the_grace_naming_it(tmp_path: Path, proc_locks: bool) -> None:
    """Named by its pid from /proc/locks; where the system has none, the reader is
    "another process" (the file names no live writer)."""
    warehouse = tmp_path / "w.duckdb"
    with reader_lock(warehouse):
        writer = _writer(warehouse, grace=1.0, proc_locks=proc_locks)
        output, _ = writer.communicate("", timeout=60)
    reader = f"process {os.getpid()}" if proc_locks else "another process"
    assert output.startswith(f"refused {warehouse.resolve()} is being read by {reader} "
                             "(diligence status, export or verify) for over 1 s"), output
    assert lock_holder(warehouse) is None  # the writer took its pid back out
    assert not lock_path(warehouse).exists()  # and the last reader out removed the file


def test_status_polled_all_through_a_sync_never_makes_it_fail(tmp_path: Path) -> None:
    """`status` read the file between two steps of a sync (its load and its dbt build,
    say): the sync's next step then failed on DuckDB's lock ("is open in process N", "could
    not set lock on file"), in every one of four syncs polled without a pause. Now status
    says a sync is creating or writing the warehouse, and the sync commits."""
    warehouse = tmp_path / "w.duckdb"
    seen: Counter[str] = Counter()
    with SandboxServer(scale="small") as server:
        server.faults.latency_ms = 20
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DILIGENCE_"))}
        syncing = subprocess.Popen(
            [str(Path(sys.executable).with_name("diligence")), "sync", "--base-url", server.base_url,
             "-w", str(warehouse)],
            env=env | {"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
                       "SOURCES__COMPANY_CONNECTIONS__PASSWORD": DEFAULT_PASSWORD},
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        def poll() -> None:
            while syncing.poll() is None:
                try:
                    seen[collect_status(Warehouse(warehouse))["state"]] += 1
                except Exception as exc:  # noqa: BLE001 - the test names it
                    seen[f"error: {exc}"] += 1

        poller = threading.Thread(target=poll)
        poller.start()
        output = syncing.communicate(timeout=300)[0]
        poller.join(timeout=60)
    assert syncing.returncode == 0, (output[-3000:], seen)
    assert not [state for state in seen if state.startswith("error")], seen
    assert seen["creating"] + seen["busy"] > 100, seen  # polled while the sync ran
    assert collect_status(Warehouse(warehouse))["state"] == "ready"
    assert not lock_path(warehouse).exists()
