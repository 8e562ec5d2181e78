"""The model build in a process of its own, started beside a sync's fetch.

A sync is bound by one core: its threads (the fetch's event loop, the loads) share one
GIL, so dbt's imports and parse (about 4 s of CPU) taken beside the fetch came out of
it one for one, and the build after the load ran where the sync had run. :func:`start`
starts a process (a new interpreter: none of the sync's threads, and unlike
multiprocessing's spawn, never the caller's main script again) that imports dbt and
parses the project on the machine's other core while the sync fetches. After
the load the models step hands it the build and the analysts' copy (:func:`take`), and
the sync's own process never imports dbt. A process that has dbt loaded already (it
built before) builds in place: a new interpreter would cost it more than it saves.

The process builds once, then exits. Its log records reach this process's loggers; its
error (a model's, dbt's, a full disk's) is raised here, with its traceback as the
cause; it ignores Ctrl-C, which the starting process handles, and ends with that
process: terminated when it exits or stops waiting, and on its own when it is killed.
A process that ends before it answers is a :class:`~diligence.errors.ModelProcessError`.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from logging.handlers import QueueHandler
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from ..config import settings
from ..errors import DiligenceError, ModelProcessError, RemoteTraceback
from ..warehouse.location import WarehouseLocation
from .dbt import PROJECT_DIR, prepare

__all__ = ["ModelBuilder", "start", "take"]

log = logging.getLogger("diligence.analytics")

#: seconds a builder that was ended (or died) has to exit before it is killed
_EXIT_SECONDS = 10.0

_waiting: ModelBuilder | None = None
_waiting_lock = threading.Lock()


class ModelBuilder:
    """A process of its own (a new interpreter running :func:`serve`, nothing of this
    one's) that imports dbt and parses `project_dir` as it starts, then runs
    `work(location, **options)` once (:meth:`build`) and exits."""

    def __init__(self, work: Callable[..., Any], project_dir: Path = PROJECT_DIR) -> None:
        mine, theirs = socket.socketpair()
        # the process reads the end of this pipe when this one has ended, whatever ended it
        watched, self._alive = os.pipe()
        self._process = subprocess.Popen(
            [sys.executable, "-c", _SERVE, str(theirs.fileno()), str(watched)],
            pass_fds=(theirs.fileno(), watched), stdin=subprocess.DEVNULL)
        theirs.close()
        os.close(watched)
        self._conn = Connection(mine.detach())
        self._conn.send(list(sys.path))  # where `work` is found
        self._conn.send((work, project_dir, _LogSettings.of_this_process()))
        self._answered = False

    @property
    def pid(self) -> int:
        return self._process.pid

    def alive(self) -> bool:
        return self._process.poll() is None

    def build(self, location: WarehouseLocation, **options: Any) -> Any:
        """What `work` returns for `location` in the building process; its error raised
        here. Ends the process (see the module docstring)."""
        try:
            self._conn.send((location, options))
            while True:
                kind, payload, remote = self._conn.recv()
                if kind == "log":
                    logging.getLogger(payload.name).handle(payload)
                    continue
                self._answered = True
                if kind == "result":
                    return payload
                payload.__cause__ = RemoteTraceback(remote)
                raise payload
        except (EOFError, BrokenPipeError, ConnectionResetError):
            self._wait()
            raise ModelProcessError(
                f"the process building the models ended before it answered "
                f"({_ending(self._process.returncode)}); analytics stays as it was") from None
        finally:
            self.close()

    def close(self) -> None:
        """End the process: one that answered exits by itself, not waited for (its exit
        takes about a second with dbt loaded); else it is terminated."""
        if self._conn.closed:
            return
        self._conn.close()
        if not self._answered:
            self._process.terminate()
            self._wait()
        os.close(self._alive)  # its end tells the process this one is done with it

    def _wait(self) -> None:
        try:
            self._process.wait(_EXIT_SECONDS)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


#: what the building process runs: Ctrl-C is the starting process's to handle, from
#: the first instant
_SERVE = ("import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "
          "from diligence.analytics.aside import serve; serve()")


def start(work: Callable[..., Any]) -> ModelBuilder | None:
    """Start a builder for the next :func:`take` (ending one nobody took), unless this
    process has dbt loaded; None then."""
    global _waiting
    with _waiting_lock:
        if _waiting is not None:
            _waiting.close()
            _waiting = None
        if "dbt.cli.main" in sys.modules:
            return None
        try:
            _waiting = ModelBuilder(work)
        except OSError:  # no process to be had (out of processes, say): build in place
            log.debug("the models' process did not start; they will build in this one", exc_info=True)
        return _waiting


def take() -> ModelBuilder | None:
    """The builder :func:`start` left waiting, for one build (None: build in place)."""
    global _waiting
    with _waiting_lock:
        builder, _waiting = _waiting, None
    return builder


def _ending(exitcode: int | None) -> str:
    if exitcode is None:
        return "it did not exit"
    if exitcode < 0:
        return f"killed by {signal.Signals(-exitcode).name}"
    return f"exit code {exitcode}"


class _Sender:
    """The building process's end of the pipe, shared by its threads; also the queue
    of its log handler."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    def send(self, kind: str, payload: Any, remote: str = "") -> None:
        with self._lock:
            self._conn.send((kind, payload, remote))

    def put_nowait(self, record: logging.LogRecord) -> None:
        self.send("log", record)


@dataclass(frozen=True)
class _LogSettings:
    """What of this process's logging (:func:`diligence.logs.configure_logging`) the
    building process applies to its records before they travel: the levels, and
    whether a log that cannot be written (dbt's on a full disk) prints a traceback."""

    levels: dict[str, int]
    raise_exceptions: bool

    @classmethod
    def of_this_process(cls) -> _LogSettings:
        return cls({name: logging.getLogger(name).level for name in ("", "diligence", "dlt")},
                   bool(logging.raiseExceptions))

    def apply(self, sender: _Sender) -> None:
        logging.raiseExceptions = self.raise_exceptions
        logging.getLogger().handlers[:] = [QueueHandler(sender)]  # type: ignore[arg-type]
        for name, level in self.levels.items():
            logging.getLogger(name).setLevel(level)


def serve() -> None:
    """The building process (``python -c`` :data:`_SERVE` CONNECTION WATCHED): parse,
    wait for the request, run it, answer, exit."""
    conn, watched = Connection(int(sys.argv[1])), int(sys.argv[2])
    _quiet_resource_tracker()
    threading.Thread(target=_end_with, args=(watched,), name="parent-watch", daemon=True).start()
    sys.path[:] = conn.recv()
    work, project_dir, logs = conn.recv()
    sender = _Sender(conn)
    logs.apply(sender)
    try:
        prepare("build", project_dir)
        settings()  # what the build reads, and with it dlt's imports (0.9 s)
    except Exception:  # noqa: BLE001 - the build parses and reads them again, and reports it
        log.debug("dbt's parse or the settings beside the sync failed; the build will try again", exc_info=True)
    try:
        location, options = conn.recv()
    except EOFError:  # the starting process went on without a build
        return
    code = 0
    try:
        result = work(location, **options)
        _answered.set()
        sender.send("result", result)
    except BaseException as exc:  # noqa: BLE001 - every error is the starting process's to raise
        remote = "".join(traceback.format_exception(exc))
        try:
            pickle.dumps(exc)
        except Exception:  # noqa: BLE001 - an error that cannot travel is told in words
            exc = DiligenceError(f"{type(exc).__name__}: {exc}")
        _answered.set()
        sender.send("error", exc, remote)
        code = 1
    finally:
        conn.close()
    _release_output()
    sys.exit(code)


def _quiet_resource_tracker() -> None:
    """Start multiprocessing's resource tracker with /dev/null for its stdout and
    stderr. dbt's locks would start it with this process's, the sync's, and it lives as
    long as this process: a reader of the sync's output (a pipe, ``| tee``, Prefect's
    worker) would wait for its end, this process's teardown (1-2 s with dbt loaded),
    after the sync itself had ended. This process lets go of that output once it has
    answered (:func:`_release_output`)."""
    saved = os.dup(1), os.dup(2)
    try:
        _release_output()
        resource_tracker.ensure_running()
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        os.close(saved[0])
        os.close(saved[1])


def _release_output() -> None:
    """Point stdout and stderr at /dev/null (once the answer is sent: nothing this
    process says from then on is read)."""
    sys.stdout.flush()
    sys.stderr.flush()
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    os.close(null)


#: set in the building process once its work is done: from then on it exits by itself
_answered = threading.Event()


def _end_with(watched: int) -> None:
    """Exit when the starting process has ended (killed, say) before the work was done:
    its end of `watched` closes, and reading it returns nothing."""
    while os.read(watched, 1):
        pass
    if not _answered.is_set():
        os._exit(1)
