"""The synchronous side of the async client: one call, or a whole sync as a stream.

:func:`run_coroutine` runs one coroutine of the client (a check, a download) to
completion from synchronous code, on a new uvloop event loop in a thread of its own.

:func:`stream_namespaces` reads every namespace side by side through one client (one
login, one token, one concurrency limit) in a background thread, staging each
namespace's rows as Arrow batches in Parquet files (:mod:`.staging`), and yields
each namespace the moment it is complete, while the others are still being read
(:class:`NamespaceStream`). The caller loads each result (with the dlt source of
:mod:`.source`) and says so; the stream keeps the sync's manifest and seals it once
every namespace was read and committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import shutil
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import uvloop

from pipelines.evidence.manifest import RowCounts
from pipelines.evidence.sealing import Sealed, seal

from .config import SourceSettings
from .evidence import EvidenceLog
from .extract import extract_namespaces
from .limits import RequestBudget
from .results import NamespaceFailure, NamespaceResult, ProgressListener

__all__ = ["NamespaceStream", "run_coroutine", "stream_namespaces"]

T = TypeVar("T")


def _run(coro: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop | None = None) -> T:
    """Run `coro` on `loop`, by default a new uvloop event loop (less CPU per request than
    asyncio's), then close the loop."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop if loop is None else lambda: loop) as runner:
        return runner.run(coro)


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion from synchronous code, with :func:`_run` in a thread of its
    own, in the caller's context.

    The caller's thread only waits, so a signal handler's exception is raised there as
    Python raises it, and the call is then cancelled: Ctrl-C's KeyboardInterrupt, and the
    ``TerminationSignal`` with which Prefect cancels a flow run. A uvloop loop running on
    the main thread would log a signal handler's exception other than KeyboardInterrupt
    ("Exception in callback Loop._read_from_self", uvloop issue #94) and carry on, leaving
    a cancelled flow run to be killed after Prefect's grace period. Called from inside a
    running event loop, it needs a thread anyway.
    """
    loop = uvloop.new_event_loop()
    result: list[T] = []
    error: list[BaseException] = []
    finished = threading.Event()  # not Thread.join: an interrupted join marks the thread ended

    def target() -> None:
        try:
            result.append(_run(coro, loop))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            error.append(exc)
        finally:
            finished.set()

    context = contextvars.copy_context()
    threading.Thread(target=context.run, args=(target,), name="company-connections-call").start()
    try:
        finished.wait()
    except BaseException:  # a signal's exception, raised here while waiting: stop the call
        with contextlib.suppress(RuntimeError):  # its loop already closed: nothing to stop
            loop.call_soon_threadsafe(_cancel_tasks, loop)
        finished.wait()
        raise
    if error:
        raise error[0]
    return result[0]


def _cancel_tasks(loop: asyncio.AbstractEventLoop) -> None:
    for task in asyncio.all_tasks(loop):
        task.cancel()


# -- the streaming fetch -------------------------------------------------------------------
_DONE = object()


class _Fetch:
    """Runs :func:`extract_namespaces` on its own event loop thread; results go to a queue."""

    def __init__(self, settings: SourceSettings, budget: RequestBudget | None,
                 evidence: EvidenceLog | None, transport: Any = None, **options: Any) -> None:
        self.settings = settings
        self.budget = budget
        self.evidence = evidence
        self.transport = transport
        self.options = options
        self.results: queue.Queue[Any] = queue.Queue()
        self.error: BaseException | None = None
        #: the client's traffic counters (:class:`~.stats.RequestStats`), once it exists
        self.stats: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = threading.Event()
        #: set once every namespace is complete (before the last one is queued) or the
        #: fetch stopped, before the client closes
        self.read_all = threading.Event()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        if self._cancelled.is_set():
            return
        async with self.settings.client(budget=self.budget, evidence=self.evidence,
                                        transport=self.transport) as client:
            self.stats = client.stats
            await extract_namespaces(
                client, on_complete=self.results.put, on_all_read=self.read_all.set, **self.options
            )
            self.read_all.set()

    def run(self) -> None:
        try:
            _run(self._main())
        except asyncio.CancelledError:
            pass
        except BaseException as exc:  # noqa: BLE001 - handed to the consuming thread
            self.error = exc
        finally:
            self.read_all.set()
            self.results.put(_DONE)

    def cancel(self) -> None:
        self._cancelled.set()
        loop, task = self._loop, self._task
        if loop is not None and task is not None:
            try:
                loop.call_soon_threadsafe(task.cancel)
            except RuntimeError:  # the loop has already closed
                pass


class NamespaceStream:
    """The namespaces of one run as they complete; the fetch starts when it is created.

    Iterate it to get each :class:`NamespaceResult` the moment it is complete; errors
    that stop the whole run are raised once the namespaces already completed have been
    yielded. Once the caller has committed a result (its snapshot, or a failure's run
    log), it says so with :meth:`committed`: the stream records the outcome in its
    manifest and deletes the result's staged files. :meth:`close` (also on leaving a
    ``with`` block) cancels a fetch still running and waits for its thread; the staged
    rows of namespaces not yet complete are deleted by the fetch itself. When every
    namespace was read and committed, the manifest is sealed into the evidence chain,
    after the interrupted syncs' manifests it continued (:attr:`head`); otherwise it is
    left unsealed, as the next sync's evidence to resume from.
    """

    def __init__(self, fetch: _Fetch, on_stats: Callable[[Any], None] | None = None,
                 continued: Sequence[Path] = ()) -> None:
        self._fetch = fetch
        self._on_stats = on_stats
        self._continued = list(continued)
        self._yielded = 0
        self._committed = 0
        self._ended = False
        #: the chain's head once this sync's manifest is sealed
        self.head: str | None = None
        #: why the chain could not be followed when it was sealed (recorded in it)
        self.chain_break: str | None = None
        self._thread = threading.Thread(target=fetch.run, name="company-connections-fetch", daemon=True)
        self._thread.start()

    def __iter__(self) -> Iterator[NamespaceResult]:
        while True:
            item = self._fetch.results.get()
            if item is _DONE:
                break
            self._yielded += 1
            yield item
        if self._fetch.error is not None:
            raise self._fetch.error
        self._ended = True

    def committed(self, result: NamespaceResult, rows: RowCounts | None = None) -> None:
        """The caller committed `result` (`rows`: the raw row versions its load inserted
        and retired, per table): its outcome goes into the manifest, its staged files
        are deleted."""
        evidence = self._fetch.evidence
        if evidence is not None:
            failed = isinstance(result, NamespaceFailure)
            evidence.writer.outcome(result.namespace_company_id, "failed" if failed else "committed",
                                    result.error if failed else None, None if failed else rows)
        self.discard(result)
        self._committed += 1

    @staticmethod
    def discard(result: NamespaceResult) -> None:
        """Delete a result's staged files (it was committed, or its load failed)."""
        folder = getattr(result, "folder", None)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)

    @property
    def read_all(self) -> bool:
        """True once every namespace has been read (set before the last one is yielded):
        nothing the caller does from then on overlaps the fetch."""
        return self._fetch.read_all.is_set()

    @property
    def fetching(self) -> bool:
        """True while namespaces are still being read and none is waiting to be taken:
        the caller would otherwise be idle (a good time for housekeeping)."""
        return not self._fetch.read_all.is_set() and self._fetch.results.empty()

    def close(self) -> None:
        if self._thread.is_alive():
            self._fetch.cancel()
            self._thread.join()
        evidence = self._fetch.evidence
        if evidence is not None:
            evidence.writer.close()
            evidence.store.close()
            if self._ended and self._committed == self._yielded and self.head is None:
                for interrupted in self._continued:  # first the syncs it went on from
                    if interrupted.exists():  # (another sync may have sealed it meanwhile)
                        self._note_break(seal(interrupted, "interrupted", lock=evidence.writer.chain_lock))
                sealed = evidence.writer.seal()
                self._note_break(sealed)
                self.head = sealed.hash
            elif evidence.writer.entries == 0:  # refused at login: nothing to keep
                evidence.writer.path.unlink(missing_ok=True)
        on_stats, self._on_stats = self._on_stats, None
        if on_stats is not None and self._fetch.stats is not None:
            on_stats(self._fetch.stats)

    def _note_break(self, sealed: Sealed) -> None:
        if sealed.breaks and self.chain_break is None:
            self.chain_break = sealed.breaks

    def __enter__(self) -> NamespaceStream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def stream_namespaces(
    settings: SourceSettings,
    *,
    staging_dir: Path,
    namespaces: Sequence[str] | None = None,
    known_namespaces: Sequence[str] = (),
    progress: ProgressListener | None = None,
    synced_at: datetime | None = None,
    on_stats: Callable[[Any], None] | None = None,
    budget: RequestBudget | None = None,
    evidence: EvidenceLog | None = None,
    continued: Sequence[Path] = (),
    skip: Mapping[str, str] | None = None,
    transport: Any = None,
) -> NamespaceStream:
    """Start reading the namespaces concurrently; iterate the stream to get each one's result.

    The fetch starts at once, in a background thread, through one client (login and
    user-info go out while the caller still prepares its loads); the caller loads each
    yielded :class:`~.results.NamespaceSnapshot` (e.g. with
    :func:`~.source.company_connections`) while the other namespaces are still being
    read. `namespaces` defaults to ``settings.namespaces``, then to every company of
    user-info plus `known_namespaces`. If the caller stops early (an exception while loading), closing
    the stream cancels the fetch and its staged rows are deleted. `on_stats` receives
    the client's traffic counters (:class:`~.stats.RequestStats`: requests, retries,
    429s, per namespace too) when the stream is closed, however it ends. `budget`
    (a :class:`~.limits.RequestBudget`) shares the account's requests with other
    processes. `evidence` keeps every response and the sync's manifest, and answers
    what interrupted syncs had read (their manifests, `continued`, are sealed before
    this one's); `skip` names namespaces not to read, with the reason (see
    :func:`~.extract.extract_namespaces`). `transport` (an ``httpx.AsyncBaseTransport``)
    answers instead of the network: a replay of kept evidence.
    """
    staging_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    fetch = _Fetch(
        settings,
        budget,
        evidence,
        transport,
        namespaces=list(namespaces or settings.namespaces or []) or None,
        staging_dir=staging_dir,
        batch_size=settings.batch_size,
        concurrency=settings.max_concurrency,
        progress=progress,
        synced_at=synced_at or datetime.now(timezone.utc),
        known_namespaces=known_namespaces,
        stall_timeout=settings.stall_timeout or None,
        skip=skip,
    )
    return NamespaceStream(fetch, on_stats, continued)
