"""Progress of a sync: a live bar per namespace on a terminal, log lines otherwise."""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..safe_text import console_text, terminal_text

log = logging.getLogger("diligence.sync")


@dataclass
class _Counts:
    planned: int = 0
    done: int = 0
    rows: int = 0


class SyncProgress:
    """Counts requests planned/done and rows per namespace; renders them.

    Implements :class:`pipelines.company_connections.extract.ProgressListener`.
    On a terminal it draws one bar per namespace; otherwise (cron, Prefect, pipes)
    it logs a line per namespace at most every `interval` seconds.
    """

    def __init__(self, *, console: Console | None = None, interval: float = 5.0, enabled: bool = True) -> None:
        self.console = console or Console(stderr=True)
        #: False (--quiet): count only, render nothing
        self.enabled = enabled
        self.live = enabled and self.console.is_terminal and sys.stderr.isatty()
        self.interval = interval
        self.counts: dict[str, _Counts] = defaultdict(_Counts)
        #: namespace -> what its requests wait for, while none completes
        self.waits: dict[str, str] = {}
        self._lock = threading.Lock()
        self._last_log: dict[str, float] = {}
        self._progress: Progress | None = None
        self._tasks: dict[str, int] = {}
        self._stopped = False

    def __enter__(self) -> SyncProgress:
        if self.live:
            self._progress = Progress(
                TextColumn("[bold]{task.fields[namespace]}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("requests · {task.fields[rows]} rows {task.fields[waiting]}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=False,
            )
            self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop rendering (idempotent): the bars stay as they are, or a last log line each."""
        if self._stopped:
            return
        self._stopped = True
        if self._progress is not None:
            self._progress.stop()
        elif self.enabled:
            for namespace in list(self.counts):
                self._log(namespace, force=True)

    def cancelled(self) -> dict[str, int]:
        """Requests planned but not done, per namespace still being read (after Ctrl-C)."""
        with self._lock:
            return {ns: c.planned - c.done for ns, c in self.counts.items() if c.planned > c.done}

    def interrupted_line(self) -> str:
        """One line for Ctrl-C: the requests cancelled (not failed) and what that means."""
        cancelled = self.cancelled()
        total = sum(cancelled.values())
        if not cancelled:
            return "interrupted: 0 requests cancelled"
        return (
            f"interrupted: {total} request{'s' if total != 1 else ''} cancelled in "
            f"{len(cancelled)} namespace{'s' if len(cancelled) != 1 else ''} not yet complete; "
            "nothing of them was committed, their previous data is kept"
        )

    # -- ProgressListener ------------------------------------------------------------
    def planned(self, namespace: str, requests: int) -> None:
        with self._lock:
            self.counts[namespace].planned += requests
        self._render(namespace)

    def done(self, namespace: str, requests: int, rows: int) -> None:
        with self._lock:
            if requests:
                self.waits.pop(namespace, None)
            counts = self.counts[namespace]
            counts.done += requests
            counts.rows += rows
        self._render(namespace)

    def waiting(self, namespace: str, state: str) -> None:
        with self._lock:
            self.waits[namespace] = state
        self._render(namespace)

    # -- rendering ---------------------------------------------------------------------
    def _render(self, namespace: str) -> None:
        if self._stopped or not self.enabled:
            return
        counts = self.counts[namespace]
        if self._progress is None:
            self._log(namespace)
            return
        task = self._tasks.get(namespace)
        if task is None:
            task = self._progress.add_task("", total=counts.planned, namespace=console_text(namespace[:12]), rows=0,
                                           waiting="")
            self._tasks[namespace] = task
        waiting = self.waits.get(namespace)
        self._progress.update(task, total=counts.planned, completed=counts.done, rows=counts.rows,
                              waiting=f"· {console_text(waiting)}" if waiting else "")

    def _log(self, namespace: str, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_log.get(namespace, 0.0) < self.interval:
            return
        self._last_log[namespace] = now
        counts = self.counts[namespace]
        waiting = self.waits.get(namespace)
        log.info(
            "namespace %s: %d/%d requests, %d rows%s",
            terminal_text(namespace),
            counts.done,
            counts.planned,
            counts.rows,
            f"; waiting: {terminal_text(waiting)}" if waiting else "",
        )
