"""Read one complete snapshot of each namespace from the service, as a stream.

The service has no filters, pages or change feed, so a sync re-reads everything a
namespace can see. For each namespace the fan-out is::

    company (own)  --+
    connections list --> per connection: company (4) + connection detail (6)
                                           |
    own company types ---------------------+--> per readable (company, type):
                                                questionnaire (7) + documents (10)
    per distinct readable type: template (8)

Every request is started as soon as what it depends on has answered, so the whole
run is bounded by the client's concurrency limit, not by round trips. Connections are
admitted a window at a time (``OPEN_CONNECTIONS``, at least 4x the limit): a
connection's requests exist as tasks only while it is read, so memory does not grow
with the size of the account. Namespaces are read side by side through one client (one
login, one token, one concurrency limit); request slots go to the first namespace
first (the client's slots are a :class:`~.limits.PriorityGate`, and each namespace's
requests carry its :data:`~.limits.request_priority`), so namespaces complete one after another. Rows are
staged as they arrive (see :mod:`.staging`): each namespace's tables go to Arrow
batches and Parquet files, never to one big list.
As soon as a namespace's last request has answered, its :class:`NamespaceSnapshot`
(the staged files) is handed to `on_complete`, so it can be loaded while the other
namespaces are still being read.

Outcomes per request:

* 403 / 404 on a child request is *authoritative*: the item is absent from the
  snapshot (so its current version ends) and a :class:`SyncIssue` records it.
* Anything else that still fails after the client's retries makes the whole
  namespace a :class:`NamespaceFailure`: its staged rows are deleted and nothing of
  it is loaded, so a transient failure can never look like a deletion.
* :class:`~.errors.AuthenticationError` aborts the run: every namespace would fail.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from .client import ServiceClient
from .errors import AuthenticationError, DeniedError, NotFoundError, ServiceError, StalledError
from .evidence import last_answer
from .keys import KeysSeen
from .limits import request_priority
from .models import ConnectionDetail, ConnectionEntry, Role
from .namespaces import plan_namespaces
from .results import (
    NamespaceFailure,
    NamespaceResult,
    NamespaceSnapshot,
    ProgressListener,
    SyncIssue,
)
from .rows import (
    company_row,
    connection_row,
    document_rows,
    questionnaire_row,
    role_row,
    template_row,
)
from .staging import NamespaceStage

T = TypeVar("T")

logger = logging.getLogger("diligence.evidence")

#: Connections of one namespace read at once (at least 4x the concurrency limit): their
#: requests wait for a slot, the others are not started yet.
OPEN_CONNECTIONS = 64
#: How often a namespace's watchdog looks, and after how many quiet seconds (no request
#: completed) it reports what the client waits for.
WATCH_INTERVAL = 1.0
QUIET_SECONDS = 2.0

# Names of the endpoints as they appear in `sync_issues.endpoint`.
ENDPOINT_COMPANY = "company"
ENDPOINT_CONNECTIONS = "connections"
ENDPOINT_CONNECTION = "connection"
ENDPOINT_QUESTIONNAIRE = "questionnaire"
ENDPOINT_TEMPLATE = "template"
ENDPOINT_DOCUMENTS = "documents"


class _RequestFailed(Exception):
    """A request of a namespace failed for good; carries where, for `sync_issues`."""

    def __init__(self, issue: SyncIssue) -> None:
        super().__init__(issue.message)
        self.issue = issue


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _response() -> str | None:
    """The response the client's last call in this task answered with (None: no
    evidence is kept)."""
    answer = last_answer()
    return answer.sha256s[0] if answer is not None else None


def _was_kept() -> bool:
    answer = last_answer()
    return answer is not None and answer.kept


class _NamespaceReader:
    """Reads one namespace; every request goes through :meth:`_call`."""

    def __init__(
        self,
        client: ServiceClient,
        role: Role,
        synced_at: datetime,
        progress: ProgressListener | None,
        stage: NamespaceStage,
        open_connections: int = OPEN_CONNECTIONS,
        stall_timeout: float | None = None,
        roles_response: str | None = None,
    ) -> None:
        self.client = client
        self.roles_response = roles_response
        self._list_response: str | None = None
        self.stall_timeout = stall_timeout
        self._last_done = asyncio.get_running_loop().time()
        self.open_connections = max(1, open_connections)
        self.role = role
        self.ns = role.company_id
        self.progress = progress
        self.stage = stage
        self.synced_at = synced_at
        self.snapshot = NamespaceSnapshot(
            namespace_company_id=self.ns, synced_at=synced_at, started_at=_now(), folder=stage.folder
        )
        self._template_types: set[str] = set()
        self.keys = KeysSeen()
        self._tasks: asyncio.TaskGroup | None = None

    # -- plumbing -----------------------------------------------------------------
    def _plan(self, requests: int) -> None:
        if self.progress is not None:
            self.progress.planned(self.ns, requests)

    async def _call(self, request: Callable[[], Awaitable[T]]) -> T:
        """Run one request; it counts as done when it answered or failed, not when it
        was cancelled (progress then reports it as cancelled), and as kept (not sent)
        when an interrupted sync's evidence answered it."""
        try:
            result = await request()
        except asyncio.CancelledError:
            raise
        except BaseException:
            self._done(sent=not _was_kept())
            raise
        self._done(sent=not _was_kept())
        return result

    def _done(self, *, sent: bool = True) -> None:
        self._last_done = asyncio.get_running_loop().time()
        if sent:
            self.snapshot.requests += 1
        else:
            self.snapshot.kept += 1
        if self.progress is not None:
            self.progress.done(self.ns, 1, 0)

    def _see_items(self, endpoint: str, items: Sequence[Any]) -> None:
        """Record the key paths of a list endpoint's items (see :mod:`.keys`), each
        with the page that had it."""
        answer = last_answer()
        responses = [answer.for_item(i) if answer is not None else None for i in range(len(items))]
        self.keys.see_items(endpoint, items, responses)

    def _stage(self, table: str, row: dict[str, Any]) -> None:
        """Stage one row the responses gave (a row received): the one place rows are
        counted, for the progress line and the snapshot alike."""
        self.stage.append(table, row)
        if self.progress is not None:
            self.progress.done(self.ns, 0, 1)

    async def _authoritative(
        self,
        endpoint: str,
        company_id: str | None,
        company_type_id: str | None,
        request: Callable[[], Awaitable[T]],
    ) -> T | None:
        """Run a child request; 403/404 become a sync issue and ``None``."""
        try:
            answer = await self._call(request)
        except (DeniedError, NotFoundError) as exc:
            self.snapshot.issues.append(
                SyncIssue(
                    endpoint=endpoint,
                    company_id=company_id,
                    company_type_id=company_type_id,
                    http_status=exc.status_code,
                    message=exc.message,
                )
            )
            return None
        except AuthenticationError:
            raise
        except ServiceError as exc:
            raise _RequestFailed(
                SyncIssue(
                    endpoint=endpoint,
                    company_id=company_id,
                    company_type_id=company_type_id,
                    http_status=exc.status_code,
                    message=str(exc),
                )
            ) from exc
        return answer

    async def _required(self, endpoint: str, request: Callable[[], Awaitable[T]]) -> T:
        """Run a request the namespace cannot do without; any failure fails it."""
        try:
            return await self._call(request)
        except AuthenticationError:
            raise
        except ServiceError as exc:
            raise _RequestFailed(
                SyncIssue(endpoint, self.ns, None, exc.status_code, str(exc))
            ) from exc

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        assert self._tasks is not None
        try:
            self._tasks.create_task(coro)
        except RuntimeError:
            # the namespace's task group is shutting down (a task failed it): it refuses
            # new work, and on Python 3.11 leaves the coroutine unclosed ("never awaited")
            coro.close()
            raise

    async def _watch(self, work: asyncio.Task[NamespaceSnapshot]) -> None:
        """While `work` runs: after ``QUIET_SECONDS`` without a completed request, tell
        the progress listener what the client waits for; after `stall_timeout`, fail
        the namespace (:class:`~.errors.StalledError`) saying so. Time spent queued
        behind other processes of the account (a shared budget) is not a stall."""
        loop = asyncio.get_running_loop()
        while not work.done():
            await asyncio.sleep(WATCH_INTERVAL)
            if self.client.queued():
                self._last_done = loop.time()
            quiet = loop.time() - self._last_done
            if quiet < QUIET_SECONDS:
                continue
            state = self.client.waiting_for()
            if self.stall_timeout is not None and quiet >= self.stall_timeout:
                raise StalledError(
                    f"no request completed for {quiet:.0f} s (stall_timeout "
                    f"{self.stall_timeout:g} s); waiting for: {state}", namespace=self.ns)
            if self.progress is not None:
                self.progress.waiting(self.ns, state)

    # -- the fan-out --------------------------------------------------------------
    async def read(self) -> NamespaceSnapshot:
        """Read the namespace, failing it if it stalls (see :meth:`_watch`)."""
        async with asyncio.TaskGroup() as guard:
            work = guard.create_task(self._read())
            watch = guard.create_task(self._watch(work))
            work.add_done_callback(lambda _: watch.cancel())
        return work.result()

    async def _read(self) -> NamespaceSnapshot:
        ns, snap = self.ns, self.snapshot
        self._stage("user_roles", role_row(ns, self.role) | {
            "synced_at": snap.synced_at, "response_sha256": self.roles_response})
        own_types = list(dict.fromkeys(self.role.internal.company_type_ids))
        self._plan(2 + 2 * len(own_types))
        async with asyncio.TaskGroup() as tasks:
            self._tasks = tasks
            tasks.create_task(self._read_company(ns, is_namespace_company=True))
            for company_type_id in own_types:
                self._spawn(self._read_target(ns, company_type_id))
            # Any failure of the list (403 included) fails the namespace: an empty or
            # partial list would retire every connection.
            entries = await self._required(
                ENDPOINT_CONNECTIONS, lambda: self.client.connections(ns)
            )
            self._list_response = _response()
            self._see_items(ENDPOINT_CONNECTIONS, entries)
            self._plan(2 * len(entries))
            # Connections are admitted a window at a time: each one's requests (and
            # their tasks) exist only while it is read, so memory does not grow with
            # the number of connections, while the window keeps every slot busy.
            window = asyncio.Semaphore(self.open_connections)
            for entry in _unique_entries(entries):
                await window.acquire()
                self._spawn(self._read_admitted(entry, window))
        for row in self.keys.rows(ns):
            self._stage("service_keys", row | {"synced_at": snap.synced_at})
        snap.tables = self.stage.close()
        snap.finished_at = _now()
        return snap

    async def _read_company(self, company_id: str, *, is_namespace_company: bool) -> None:
        company = await self._authoritative(
            ENDPOINT_COMPANY,
            company_id,
            None,
            lambda: self.client.company(self.ns, company_id),
        )
        if company is None:
            return
        self.keys.see(ENDPOINT_COMPANY, company, _response())
        row = company_row(self.ns, company_id, company, is_namespace_company=is_namespace_company)
        self._stage("companies", row | {"synced_at": self.synced_at, "response_sha256": _response()})

    async def _read_admitted(self, entry: ConnectionEntry, window: asyncio.Semaphore) -> None:
        try:
            await self._read_connection(entry)
        finally:
            window.release()

    async def _read_connection(self, entry: ConnectionEntry) -> None:
        """A connection's company, detail and then each readable type's target, all done
        when this returns (its requests run side by side)."""
        async with asyncio.TaskGroup() as subtree:
            subtree.create_task(self._read_company(entry.id, is_namespace_company=False))
            subtree.create_task(self._read_connection_detail(entry, subtree))

    async def _read_connection_detail(self, entry: ConnectionEntry, subtree: asyncio.TaskGroup) -> None:
        detail: ConnectionDetail | None = await self._authoritative(
            ENDPOINT_CONNECTION,
            entry.id,
            None,
            lambda: self.client.connection(self.ns, entry.id),
        )
        # the detail's response when there is one, else the list's (a 403/404 detail)
        response = _response() if detail is not None else self._list_response
        if detail is not None:
            self.keys.see(ENDPOINT_CONNECTION, detail, response)
        row = connection_row(self.ns, entry, detail)
        self._stage("connections", row | {"synced_at": self.synced_at, "response_sha256": response})
        received = detail.reading_rights.received.company_type_ids if detail else []
        received_types = list(dict.fromkeys(received))
        self._plan(2 * len(received_types))
        for company_type_id in received_types:
            subtree.create_task(self._read_target(entry.id, company_type_id))

    async def _read_target(self, company_id: str, company_type_id: str) -> None:
        """Questionnaire and documents of one (company, company type), side by side."""
        if company_type_id not in self._template_types:
            self._template_types.add(company_type_id)
            self._plan(1)
            self._spawn(self._read_template(company_type_id))
        async with asyncio.TaskGroup() as both:
            both.create_task(self._read_documents(company_id, company_type_id))
            both.create_task(self._read_questionnaire(company_id, company_type_id))

    async def _read_questionnaire(self, company_id: str, company_type_id: str) -> None:
        questionnaire = await self._authoritative(
            ENDPOINT_QUESTIONNAIRE,
            company_id,
            company_type_id,
            lambda: self.client.questionnaire(self.ns, company_id, company_type_id),
        )
        if questionnaire is None:
            return
        self.keys.see(ENDPOINT_QUESTIONNAIRE, questionnaire.raw_body, _response())
        row = questionnaire_row(self.ns, company_id, company_type_id, questionnaire)
        self._stage("questionnaires", row | {"synced_at": self.synced_at, "response_sha256": _response()})

    async def _read_documents(self, company_id: str, company_type_id: str) -> None:
        documents = await self._authoritative(
            ENDPOINT_DOCUMENTS,
            company_id,
            company_type_id,
            lambda: self.client.documents(self.ns, company_id, company_type_id),
        )
        if not documents:
            return
        answer = last_answer()
        self._see_items(ENDPOINT_DOCUMENTS, [document.raw for document in documents])
        for index, row in document_rows(self.ns, company_id, company_type_id, documents):
            self._stage("documents", row | {
                "synced_at": self.synced_at,
                "response_sha256": answer.for_item(index) if answer is not None else None})

    async def _read_template(self, company_type_id: str) -> None:
        template = await self._authoritative(
            ENDPOINT_TEMPLATE,
            None,
            company_type_id,
            lambda: self.client.template(self.ns, company_type_id),
        )
        if template is None:
            return
        self.keys.see(ENDPOINT_TEMPLATE, template.raw_body, _response())
        self._stage("questionnaire_templates", template_row(self.ns, company_type_id, template) | {
            "synced_at": self.synced_at, "response_sha256": _response()})


def _unique_entries(entries: Sequence[ConnectionEntry]) -> list[ConnectionEntry]:
    unique: dict[str, ConnectionEntry] = {}
    for entry in entries:
        unique.setdefault(entry.id, entry)
    return list(unique.values())


def _root_cause(exc: BaseException) -> BaseException:
    """The first real error inside (possibly nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def describe_error(exc: BaseException) -> str:
    """One line naming what failed, without secrets (errors never carry them)."""
    exc = _root_cause(exc)
    if isinstance(exc, ServiceError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


async def extract_namespaces(
    client: ServiceClient,
    namespaces: Sequence[str] | None = None,
    *,
    staging_dir: Path,
    on_complete: Callable[[NamespaceResult], None],
    batch_size: int = 1000,
    concurrency: int | None = None,
    progress: ProgressListener | None = None,
    synced_at: datetime | None = None,
    known_namespaces: Sequence[str] = (),
    open_connections: int | None = None,
    on_all_read: Callable[[], None] | None = None,
    stall_timeout: float | None = None,
    skip: Mapping[str, str] | None = None,
) -> list[NamespaceResult]:
    """Read every requested namespace (default: every company of the user) side by side.

    Each namespace's rows are staged under `staging_dir` as they arrive, at most
    `batch_size` rows per table in memory. The moment a namespace is complete, its
    :class:`NamespaceSnapshot` goes to `on_complete` (called in the event loop's
    thread: it must only hand the snapshot over, e.g. put it on a queue). The
    namespaces are planned by :func:`~.namespaces.plan_namespaces` from user-info and
    `known_namespaces` (those synced before): an asked namespace that is neither raises
    :class:`~.errors.UnknownNamespaceError` before anything is read. A namespace synced
    before that user-info no longer lists (access lost), or whose reading fails after
    retries, becomes a :class:`NamespaceFailure` (also given to `on_complete`) and its
    staged rows are deleted; its data is kept, not retired, and the others are unaffected.

    Requests wait for a slot of the client by namespace order (see
    :class:`~.limits.PriorityGate`), so namespaces complete one after another.
    `open_connections` (default :data:`OPEN_CONNECTIONS`, at least 4x `concurrency`)
    bounds the connections of a namespace being read at once. A namespace none of whose
    requests completes for `stall_timeout` seconds fails (:class:`~.errors.StalledError`,
    naming what the client waited for); so does the whole run if user-info does not
    answer within it (time queued behind the account's other runs, see
    :meth:`~.client.ServiceClient.queued`, does not count). `on_all_read` is
    called once every namespace is read, just before the last result goes to
    `on_complete`.

    With the client's evidence (:class:`~.evidence.EvidenceLog`), every response is
    kept and each row names its response (``response_sha256``); requests an interrupted
    sync completed for a namespace it did not commit are answered from its evidence.
    `skip` maps namespaces not to read (committed by the interrupted sync) to the
    reason, said in one line each.

    Returns every result in the order they completed. Raises
    :class:`AuthenticationError` when the credentials are refused.
    """
    synced_at = synced_at or _now()
    results: list[NamespaceResult] = []

    def complete(result: NamespaceResult) -> None:
        results.append(result)
        if on_all_read is not None and len(results) == len(wanted):
            on_all_read()  # before the last result is handed on: its taker knows it is last
        on_complete(result)

    async def ask() -> tuple[Any, str | None]:
        info = await client.user_info()
        return info, _response()

    asking = asyncio.ensure_future(ask())
    loop = asyncio.get_running_loop()
    deadline = None if stall_timeout is None else loop.time() + stall_timeout
    while not asking.done() and (deadline is None or loop.time() < deadline):
        await asyncio.wait([asking], timeout=None if deadline is None else min(0.25, stall_timeout))
        if deadline is not None and client.queued():  # behind the account's other runs:
            deadline = loop.time() + stall_timeout    # the clock starts once it is let in
    if not asking.done():
        state = client.waiting_for()
        asking.cancel()
        raise StalledError(f"user-info did not answer within stall_timeout ({stall_timeout:g} s); "
                           f"waiting for: {state}")
    user_info, roles_response = asking.result()
    roles = {role.company_id: role for role in user_info.roles}
    wanted = plan_namespaces(namespaces, list(roles), known_namespaces)

    for namespace in [ns for ns in wanted if ns in (skip or {})]:
        wanted.remove(namespace)
        logger.info("namespace %s: not read again: %s", namespace, (skip or {})[namespace])
    priorities = {namespace: index for index, namespace in enumerate(wanted)}

    async def read_one(namespace: str) -> None:
        begun = _now()
        request_priority.set(priorities[namespace])  # for every request of this task's tree
        role = roles.get(namespace)
        if role is None:  # synced before (see plan_namespaces): access lost
            error = (
                f"namespace {namespace} was synced before but user-info no longer lists "
                "it (access lost?); its data is kept as last synced. To stop syncing it, "
                "set `namespaces` in the config"
            )
            complete(
                NamespaceFailure(
                    namespace_company_id=namespace, error=error, started_at=begun, finished_at=_now()
                )
            )
            return
        stage = NamespaceStage.create(staging_dir, namespace, batch_size)
        reader = _NamespaceReader(
            client,
            role,
            synced_at,
            progress,
            stage,
            open_connections=open_connections or max(OPEN_CONNECTIONS, 4 * (concurrency or 0)),
            stall_timeout=stall_timeout,
            roles_response=roles_response,
        )
        kept = client.evidence.kept.namespaces.get(namespace) if client.evidence is not None else None
        if kept is not None:
            since = kept[1].astimezone().strftime("%H:%M") if kept[1] else "?"
            logger.info("namespace %s: resuming, %s requests kept from %s", namespace, f"{kept[0]:,}", since)
            reader.snapshot.kept_since = kept[1]
        try:
            snapshot = await reader.read()
        except BaseException as exc:  # noqa: BLE001 - sorted out just below
            stage.discard()
            cause = _root_cause(exc)
            if isinstance(cause, AuthenticationError):
                raise cause from None
            if not isinstance(cause, Exception):
                raise
            complete(
                NamespaceFailure(
                    namespace_company_id=namespace,
                    error=describe_error(cause.__cause__ or cause)
                    if isinstance(cause, _RequestFailed)
                    else describe_error(cause),
                    started_at=begun,
                    finished_at=_now(),
                    requests=reader.snapshot.requests,
                    issue=cause.issue if isinstance(cause, _RequestFailed) else None,
                    kept=reader.snapshot.kept,
                )
            )
            return
        complete(snapshot)

    try:
        async with asyncio.TaskGroup() as tasks:
            for namespace in wanted:
                tasks.create_task(read_one(namespace))
    except BaseExceptionGroup as group:
        raise _root_cause(group) from None
    return results
