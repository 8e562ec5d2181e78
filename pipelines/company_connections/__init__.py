"""dlt source `company_connections`: every namespace of a user, landed faithfully.

The shape of a run::

    settings = resolve_settings()                       # one @configspec, resolved once
    with stream_namespaces(settings, staging_dir=folder) as stream:   # the fetch starts here
        pipeline = ...                                                    # prepared meanwhile
        for result in stream:
            pipeline.run(company_connections(result, sync_id=run_id), loader_file_format="parquet")

:func:`stream_namespaces` reads every namespace side by side through one client (one
login, one token, one concurrency limit) in a background thread, staging each
namespace's rows as Arrow batches in Parquet files (:mod:`.staging`), and yields
each namespace the moment it is complete, while the others are still being read.

:func:`company_connections` is the dlt source of one such namespace. It does no I/O:
it declares its resources with their write dispositions and keys, scoped to that
namespace, and the staged rows flow when dlt extracts them. Current-state tables are
replaced per namespace (``delete-insert``), companies, connections, questionnaires
and documents keep their history (``scd2``, versions by ``content_hash``, valid from
the run's ``synced_at``), and every merge is scoped to the namespace's own rows. A
namespace that failed is given to the source too, but only its run log
(``sync_runs``, ``sync_issues``) is loaded: nothing of its data is committed, nothing
of its history retired.

A selective run (``selected=("documents", ...)``) declares only the selected data
resources: dlt then runs no merge for the others, so their rows and history are left
exactly as they were (nothing retired), while the selected ones are merged as usual.
"""

from __future__ import annotations

import asyncio
import queue
import shutil
import sys
import threading
from collections.abc import Callable, Collection, Coroutine, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

import dlt
import pyarrow as pa
import uvloop
from dlt.extract import DltResource

from . import settings as s
from .config import SourceSettings, resolve_settings
from .evidence import EvidenceLog, Kept, ManifestIdentity
from .extract import (
    NamespaceFailure,
    NamespaceResult,
    NamespaceSnapshot,
    ProgressListener,
    SyncIssue,
    extract_namespaces,
)
from .limits import RequestBudget
from .manifest import Sealed, seal
from .namespaces import plan_namespaces
from .schema import CURRENT_STATE, HISTORY, TABLE_COLUMNS, WHOLE_RUN_ONLY, arrow_schema
from .staging import StagedTable, read_batches, warm_up_conversions

__all__ = [
    "company_connections",
    "stream_namespaces",
    "NamespaceStream",
    "resolve_settings",
    "run_coroutine",
    "SourceSettings",
    "NamespaceFailure",
    "NamespaceResult",
    "NamespaceSnapshot",
    "ProgressListener",
    "TABLE_COLUMNS",
    "DATA_RESOURCES",
    "selected_rows",
    "arrow_schema",
    "EvidenceLog",
    "Kept",
    "ManifestIdentity",
    "plan_namespaces",
]

T = TypeVar("T")


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on a new uvloop event loop (less CPU per request than asyncio's)."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion, also when called from inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run(coro)
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(_run(coro))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            error.append(exc)

    thread = threading.Thread(target=target, name="company-connections-call")
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


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
        #: the client's traffic counters (:class:`~.client.RequestStats`), once it exists
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
        # The caller's loads are Python work that holds the GIL; the fetch thread gets it
        # back within FETCH_SWITCH_INTERVAL (instead of 5 ms), so responses are not kept
        # waiting behind a load. Restored on close.
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_interval, s.FETCH_SWITCH_INTERVAL))
        self._thread.start()
        # pyarrow's first conversion from Python objects imports pandas (~0.3 s of held
        # GIL): done here, in the caller's thread while login and user-info are on the
        # wire, rather than on the fetch thread's event loop with every slot in flight.
        try:
            warm_up_conversions()
        except BaseException:  # e.g. Ctrl-C: no caller will close a stream it never got
            self.close()
            raise

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

    def committed(self, result: NamespaceResult) -> None:
        """The caller committed `result`: its outcome goes into the manifest, its staged
        files are deleted."""
        evidence = self._fetch.evidence
        if evidence is not None:
            failed = isinstance(result, NamespaceFailure)
            evidence.writer.outcome(result.namespace_company_id, "failed" if failed else "committed",
                                    result.error if failed else None)
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
        sys.setswitchinterval(self._switch_interval)
        evidence = self._fetch.evidence
        if evidence is not None:
            evidence.writer.close()
            if self._ended and self._committed == self._yielded and self.head is None:
                for interrupted in self._continued:  # first the syncs it went on from
                    if interrupted.exists():  # (another sync may have sealed it meanwhile)
                        self._note_break(seal(interrupted, "interrupted"))
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
    yielded :class:`NamespaceSnapshot` (e.g. with :func:`company_connections`) while
    the other namespaces are still being read. `namespaces` defaults to
    ``settings.namespaces``, then to every company of user-info plus
    `known_namespaces`. If the caller stops early (an exception while loading), closing
    the stream cancels the fetch and its staged rows are deleted. `on_stats` receives
    the client's traffic counters (:class:`~.client.RequestStats`: requests, retries,
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


# -- the source of one namespace -------------------------------------------------------------
def _sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _staged(snapshot: NamespaceSnapshot, table: str) -> Iterator[pa.Table]:
    yield from read_batches(snapshot.tables.get(table) or StagedTable(table))


@dlt.resource(name="user_roles", columns=TABLE_COLUMNS["user_roles"], primary_key=list(CURRENT_STATE["user_roles"]), write_disposition={"disposition": "merge", "strategy": "delete-insert"})
def user_roles(snapshot: NamespaceSnapshot) -> Iterator[pa.Table]:
    """The namespace's role: names and company types, inside and outside."""
    yield from _staged(snapshot, "user_roles")


_SCD2 = {"disposition": "merge", "strategy": "scd2", "row_version_column_name": "content_hash"}


@dlt.resource(name="questionnaire_templates", columns=TABLE_COLUMNS["questionnaire_templates"], write_disposition=_SCD2)
def questionnaire_templates(snapshot: NamespaceSnapshot) -> Iterator[pa.Table]:
    """Templates (endpoint 8) of every company type the namespace reads."""
    yield from _staged(snapshot, "questionnaire_templates")


@dlt.resource(name="companies", columns=TABLE_COLUMNS["companies"], write_disposition=_SCD2)
def companies(snapshot: NamespaceSnapshot) -> Iterator[pa.Table]:
    """The namespace's own company and each connection's company (endpoint 4)."""
    yield from _staged(snapshot, "companies")


@dlt.resource(name="connections", columns=TABLE_COLUMNS["connections"], write_disposition=_SCD2)
def connections(snapshot: NamespaceSnapshot) -> Iterator[pa.Table]:
    """Listed connections (5) with their detail and reading rights (6)."""
    yield from _staged(snapshot, "connections")


@dlt.resource(name="questionnaires", columns=TABLE_COLUMNS["questionnaires"], write_disposition=_SCD2)
def questionnaires(snapshot: NamespaceSnapshot) -> Iterator[pa.Table]:
    """Answers (7) of every readable (company, company type), forms as JSON text."""
    yield from _staged(snapshot, "questionnaires")


@dlt.resource(name="documents", columns=TABLE_COLUMNS["documents"], write_disposition=_SCD2)
def documents(snapshot: NamespaceSnapshot) -> Iterator[pa.Table]:
    """Documents (10) of every readable (company, company type)."""
    yield from _staged(snapshot, "documents")


@dlt.resource(name="service_keys", columns=TABLE_COLUMNS["service_keys"], write_disposition=_SCD2)
def service_keys(snapshot: NamespaceSnapshot) -> Iterator[pa.Table]:
    """Every key path the service sent per endpoint, and whether it is modelled (see .keys)."""
    yield from _staged(snapshot, "service_keys")


@dlt.resource(name="sync_issues", columns=TABLE_COLUMNS["sync_issues"], write_disposition="append")
def sync_issues(rows: list[dict[str, Any]]) -> Iterator[pa.Table]:
    """Requests of the run that were denied (403), not found (404) or failed for good."""
    yield pa.Table.from_pylist(rows, schema=arrow_schema("sync_issues"))


@dlt.resource(name="sync_runs", columns=TABLE_COLUMNS["sync_runs"], write_disposition="append")
def sync_runs(rows: list[dict[str, Any]]) -> Iterator[pa.Table]:
    """One row per (sync, namespace): its outcome, counts and error."""
    yield pa.Table.from_pylist(rows, schema=arrow_schema("sync_runs"))


_DATA_RESOURCES = {
    "user_roles": user_roles,
    "questionnaire_templates": questionnaire_templates,
    "companies": companies,
    "connections": connections,
    "questionnaires": questionnaires,
    "documents": documents,
    "service_keys": service_keys,
}
assert set(_DATA_RESOURCES) == {*CURRENT_STATE, *HISTORY}
#: Names of the data resources a run may select (the run log is always loaded;
#: ``service_keys`` only with every other one, see WHOLE_RUN_ONLY).
DATA_RESOURCES: tuple[str, ...] = tuple(name for name in _DATA_RESOURCES if name not in WHOLE_RUN_ONLY)


def _issue_row(sync_id: str, namespace: str, issue: SyncIssue, synced_at: datetime) -> dict[str, Any]:
    return {
        "sync_id": sync_id,
        "namespace_company_id": namespace,
        "endpoint": issue.endpoint,
        "company_id": issue.company_id,
        "company_type_id": issue.company_type_id,
        "http_status": issue.http_status,
        "message": issue.message,
        "synced_at": synced_at,
    }


def selected_rows(snapshot: NamespaceSnapshot, resources: Collection[str] | None = None) -> int:
    """Rows of the snapshot's tables that a run selecting `resources` loads."""
    return sum(t.rows for name, t in snapshot.tables.items() if resources is None or name in resources)


def run_log(
    result: NamespaceResult,
    sync_id: str,
    synced_at: datetime,
    resources: Collection[str] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows of `sync_runs` and `sync_issues` that record `result`."""
    ns = result.namespace_company_id
    if isinstance(result, NamespaceSnapshot):
        issues = [_issue_row(sync_id, ns, issue, synced_at) for issue in result.issues]
        run = {
            "status": "success",
            "finished_at": result.finished_at,
            "rows_loaded": selected_rows(result, resources),
            "issues": len(result.issues),
            "error": None,
        }
    else:
        issues = [_issue_row(sync_id, ns, result.issue, synced_at)] if result.issue else []
        run = {
            "status": "failed",
            "finished_at": result.finished_at,
            "rows_loaded": 0,
            "issues": len(issues),
            "error": result.error,
        }
    runs = [
        {
            "sync_id": sync_id,
            "namespace_company_id": ns,
            "started_at": result.started_at,
            "requests": result.requests,
            "synced_at": synced_at,
            **run,
        }
    ]
    return runs, issues


@dlt.source(name="company_connections", max_table_nesting=0)
def company_connections(
    result: NamespaceResult,
    sync_id: str,
    synced_at: datetime | None = None,
    selected: Collection[str] | None = None,
) -> list[DltResource]:
    """The resources of one namespace's result: its staged tables and its run log.

    Args:
        result: a :class:`NamespaceSnapshot` (its staged tables are loaded, every merge
            scoped to the namespace) or a :class:`NamespaceFailure` (only its run log).
        sync_id: identifies the run in `sync_runs` and `sync_issues`.
        synced_at: the run's time, the scd2 boundary of every namespace of the run
            (default: the snapshot's).
        selected: names of the data resources to load (default: all of
            :data:`DATA_RESOURCES`); the others are not declared, so nothing of them
            is merged, deleted or retired.
    """
    ns = result.namespace_company_id
    when = synced_at or getattr(result, "synced_at", None) or result.started_at
    unknown = sorted(set(selected or ()) - set(_DATA_RESOURCES))
    if unknown:
        raise ValueError(f"unknown resource(s) {', '.join(unknown)}; expected some of {', '.join(_DATA_RESOURCES)}")
    runs, issues = run_log(result, sync_id, when, selected)
    resources: list[DltResource] = []
    if isinstance(result, NamespaceSnapshot):
        scope = f"{{table}}.namespace_company_id = {_sql_literal(ns)}"
        whole = selected is None or set(DATA_RESOURCES) <= set(selected)
        for name, resource in _DATA_RESOURCES.items():
            if not whole and (name in WHOLE_RUN_ONLY or name not in selected):  # type: ignore[operator]
                continue
            disposition: dict[str, Any]
            if name in HISTORY:
                disposition = {**_SCD2, "destination_scope": scope, "boundary_timestamp": when}
            else:
                disposition = {"disposition": "merge", "strategy": "delete-insert", "destination_scope": scope}
            resources.append(resource(result).apply_hints(write_disposition=disposition))  # type: ignore[func-returns-value]
    if issues:
        resources.append(sync_issues(issues))
    resources.append(sync_runs(runs))
    return resources
