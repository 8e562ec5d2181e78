"""One sync: read every namespace, commit each one as soon as it is complete.

::

    fetch thread (one client, one token, one concurrency limit)
      ns A  ──requests──> staged Parquet ──complete──┐
      ns B  ──requests──────────> staged ────────────┼──complete──┐
      ns C  ──requests──> FAILED (staged rows deleted)┘            │
    this thread (the warehouse's only writer)                      │
      load A (one dlt run, merges scoped to A) ... load B ...──────┘
      record C as failed (sync_runs, sync_issues); its data and history stay

The warehouse is held from the start (a file is opened once, and every load goes
through that connection), then the fetch starts. Loads run one at a time in the calling
thread (DuckDB has one writer and dlt's pipeline runs are serialized) while the fetch
goes on in the background; request slots go to the first namespace first, so namespaces
complete one after another and only the last one's load comes after the last response.
A namespace commits whole or not at all: its dlt run's jobs run one at a time in one
transaction (:meth:`~diligence.warehouse.Warehouse.load`), so a kill, a full disk or a failed job leaves the
warehouse as it was, and it is in the warehouse whatever happens to the others later.
A file's WAL is written into it while the loader would otherwise wait for the fetch.
The CLI (`diligence sync`), the demo and the Prefect flow all reach :func:`run_sync`
through :mod:`diligence.steps`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
from dlt.common.configuration.exceptions import ConfigFieldMissingException

from pipelines.company_connections import (
    NamespaceResult,
    NamespaceSnapshot,
    NamespaceStream,
    SourceSettings,
    company_connections,
    resolve_settings,
    selected_rows,
    stream_namespaces,
)
from pipelines.company_connections.config import LIMITS
from pipelines.company_connections.errors import ConfigurationError
from pipelines.company_connections.schema import upgrade_raw
from pipelines.company_connections.urls import validate_base_url

from .config import check_source_settings
from .errors import SettingsError, SyncError, raised_on_purpose
from .evidence.accounting import count_commit
from .evidence.bucket import kept_in_step
from .evidence.keeping import evidence_log, file_modes
from .memory import bound_process_memory
from .resume import plan_resume
from .warehouse import LOAD_MEMORY_LIMIT, SYNC_KEEP_WAL_BYTES, Warehouse
from .warehouse.lock import mark_creating

log = logging.getLogger("diligence.sync")

__all__ = ["NamespaceOutcome", "Replaying", "SyncResult", "SyncError", "run_sync", "source_settings"]


@dataclass
class NamespaceOutcome:
    """What a sync did for one namespace."""

    namespace_company_id: str
    status: str  # "success" | "failed"
    requests: int
    #: rows received: the rows its responses gave (each row of each raw table it loads)
    rows: int
    issues: int
    duration_seconds: float
    error: str | None = None
    #: when its load committed (None when it was not loaded)
    loaded_at: datetime | None = None
    #: seconds its dlt run took
    load_seconds: float = 0.0
    #: False when retrying cannot help (the namespace is not the user's)
    retryable: bool = True
    #: raw table -> rows loaded into it (empty when not loaded)
    rows_per_table: dict[str, int] = field(default_factory=dict)
    #: requests answered from the evidence of an interrupted sync (not sent again)
    requests_kept: int = 0
    #: when that interrupted sync began reading the namespace
    kept_since: datetime | None = None
    #: row versions written: the new versions its commit inserted into raw (a row
    #: received that did not change is no new version)
    versions_written: int = 0


@dataclass
class SyncResult:
    """The outcome of :func:`run_sync`."""

    sync_id: str
    #: the DuckDB file, or the lake's URI (password redacted)
    warehouse: Path | str
    synced_at: datetime
    namespaces: list[NamespaceOutcome]
    #: ``extract``: start to the last namespace read; ``load``: from then to the end
    timings: dict[str, float] = field(default_factory=dict)
    load_info: list[Any] = field(default_factory=list)
    #: the client's traffic counters (``RequestStats.as_dict()``: requests, retries,
    #: 429s, overall and ``by_namespace``); empty when no client was made
    request_stats: dict[str, Any] = field(default_factory=dict)
    #: the data resources this sync loaded (None: all of them)
    resources: tuple[str, ...] | None = None
    #: namespaces an interrupted sync had committed, so not read again -> why
    not_read_again: dict[str, str] = field(default_factory=dict)
    #: the evidence chain's head once this sync's manifest is sealed (None: none kept)
    evidence_head: str | None = None
    #: the break of the evidence chain this sync found and recorded (None: it linked)
    evidence_break: str | None = None

    @property
    def failed(self) -> list[NamespaceOutcome]:
        return [n for n in self.namespaces if n.status != "success"]

    @property
    def requests(self) -> int:
        return sum(n.requests for n in self.namespaces)

    @property
    def rows(self) -> int:
        """Rows received (see :attr:`NamespaceOutcome.rows`)."""
        return sum(n.rows for n in self.namespaces)

    @property
    def versions_written(self) -> int:
        """Row versions written (see :attr:`NamespaceOutcome.versions_written`)."""
        return sum(n.versions_written for n in self.namespaces)

    @property
    def seconds(self) -> float:
        return sum(self.timings.get(k, 0.0) for k in ("extract", "load"))


def _unwrap(exc: BaseException) -> BaseException:
    """The error that dlt wrapped, so users see the real cause in one line."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if raised_on_purpose(current):
            return current
        exc = current
        # `raise X from None` says X is the cause to show: its context is not followed
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    return exc


def _describe(exc: BaseException) -> str:
    cause = _unwrap(exc)
    missing = next(
        (e for e in (exc, cause) if isinstance(e, ConfigFieldMissingException)), None
    )
    if missing is not None:
        keys = ", ".join(missing.fields)
        env = ", ".join(_env(k) for k in missing.fields)
        return (
            f"missing setting {keys} of source company_connections: set it in "
            f".dlt/config.toml / .dlt/secrets.toml or as {env}"
        )
    if raised_on_purpose(cause):
        return str(cause)
    return f"{type(cause).__name__}: {cause}"


def _known(exc: BaseException) -> bool:
    """Whether a sync's failure `exc` is one it knows: ours or the client's (raised on
    purpose), or the disk's or DuckDB's. Anything else is a bug: it stays itself (the
    CLI shows its line and the ``--debug`` hint; a flow does not retry it)."""
    cause = _unwrap(exc)
    return raised_on_purpose(cause) or isinstance(cause, (OSError, duckdb.Error))


def _transient(exc: BaseException) -> bool:
    """Whether another attempt may succeed: as a known error says; of the others, a lost
    connection, a timeout and DuckDB's I/O errors (a file briefly locked) may."""
    cause = _unwrap(exc)
    said = getattr(cause, "transient", None)
    if isinstance(said, bool):
        return said
    return isinstance(cause, (ConnectionError, TimeoutError, duckdb.IOException))


def source_settings(**overrides: Any) -> SourceSettings:
    """The source's settings, resolved once at the edge (the CLI, a flow): `overrides`
    that are not None win over dlt config (``.dlt/*.toml``, env vars), which wins over
    the defaults. The typed object then travels down: sync, downloads, check.

    Raises :class:`~diligence.errors.SettingsError` (one line naming the key and its
    variable, exit code 2) when a configured value is of the wrong type or out of range,
    or a setting is missing (the URL, the credentials), and :class:`SyncError` (one
    line, not transient) when a setting is not one of the source's.
    """
    check_source_settings(LIMITS, overrides)
    try:
        settings = resolve_settings(**overrides)
    except ConfigFieldMissingException as exc:
        raise SettingsError(_describe(exc)) from None
    except Exception as exc:  # noqa: BLE001 - turned into one clear line
        raise SyncError(_describe(exc), transient=False) from None
    try:
        validate_base_url(settings.base_url, settings.allow_insecure_http)
    except ConfigurationError as exc:
        raise SettingsError(f"{exc} ({_env('base_url')} or --base-url)") from None
    if not settings.password and not settings.access_token:
        raise SettingsError(f"no credentials: set email and password ({_env('email')} and {_env('password')}), or "
                            f"access_token ({_env('access_token')}), in .dlt/secrets.toml or the environment")
    if settings.password and not settings.email:
        raise SettingsError(f"a password needs an email: set email ({_env('email')})")
    return settings


def _env(key: str) -> str:
    """The variable of the source's setting `key`."""
    return f"SOURCES__COMPANY_CONNECTIONS__{key.upper()}"


def _outcome(
    result: Any, loaded_at: datetime | None, load_seconds: float, resources: tuple[str, ...] | None = None
) -> NamespaceOutcome:
    duration = ((result.finished_at or result.started_at) - result.started_at).total_seconds()
    if isinstance(result, NamespaceSnapshot):
        return NamespaceOutcome(
            namespace_company_id=result.namespace_company_id,
            status="success",
            requests=result.requests,
            rows=selected_rows(result, resources),
            issues=len(result.issues),
            duration_seconds=duration,
            loaded_at=loaded_at,
            load_seconds=load_seconds,
            rows_per_table={
                name: table.rows
                for name, table in sorted(result.tables.items())
                if resources is None or name in resources
            },
            requests_kept=result.kept,
            kept_since=result.kept_since,
        )
    return NamespaceOutcome(
        namespace_company_id=result.namespace_company_id,
        status="failed",
        requests=result.requests,
        rows=0,
        issues=0,
        duration_seconds=duration,
        error=result.error,
        load_seconds=load_seconds,
        retryable=result.requests > 0 or result.issue is not None,
        requests_kept=result.kept,
    )


def _loading(owner: Warehouse) -> contextlib.AbstractContextManager[Any]:
    """A file is opened once, when the sync starts, and held to its end: every
    namespace's dlt run loads through that connection, in a transaction of its own (a
    lake's runs load through the session that :meth:`Warehouse.writing` keeps for the
    step).

    Each load is durable at its commit (DuckDB's WAL). Writing the WAL into the file (a
    checkpoint, ~0.2 s per namespace of the `medium` profile) is done while the fetch
    still runs; the last namespace's is left to the next step that opens the file,
    instead of adding to the sync's wall time after the last response, unless that WAL
    is large (then the next step would hold it all in memory).
    """
    if owner.path is None:
        return contextlib.nullcontext()
    return owner.session(memory_limit=LOAD_MEMORY_LIMIT, threads=None, keep_wal_up_to=SYNC_KEEP_WAL_BYTES)


def _commit(owner: Warehouse, stream: NamespaceStream, result: NamespaceResult,
            source: Callable[[], Any], synced_at: datetime) -> Any:
    """Load one namespace's result (its snapshot, or a failure's run log) whole or not at
    all (:meth:`Warehouse.load`), then tell the stream it is committed (it records the
    outcome in its manifest, with the row versions the commit inserted and retired, and
    deletes the staged files). Returns dlt's load info and the row versions written."""
    try:
        info = owner.load(source, result.namespace_company_id if owner.is_lake else None, prepare=upgrade_raw)
    except Exception as exc:
        stream.discard(result)
        if isinstance(cause := _unwrap(exc), KeyboardInterrupt):
            raise cause from None  # a Ctrl-C in a step of dlt's, which wraps it: still a Ctrl-C
        if not _known(exc):
            raise
        raise SyncError(
            f"loading namespace {result.namespace_company_id} into {owner.display()} failed: "
            f"{_describe(exc)}", path=owner.pipelines_root, transient=_transient(exc),
        ) from exc
    rows: dict[str, list[int]] = {}
    if isinstance(result, NamespaceSnapshot):
        with owner.session(memory_limit=LOAD_MEMORY_LIMIT, threads=None) as con:
            rows = count_commit(con, result.namespace_company_id, synced_at)
    stream.committed(result, rows if isinstance(result, NamespaceSnapshot) else None)
    return info, sum(inserted for table, (inserted, _retired) in rows.items() if table != "user_roles")


@dataclass(frozen=True)
class Replaying:
    """A sync that replays a kept one (see :mod:`diligence.audit.replay`): its id and
    time are the original's, and `transport` answers from the original's evidence."""

    sync_id: str
    synced_at: datetime
    transport: Any
    #: the original's sealed manifest hash (in the replay's own manifest header)
    replay_of: str


def run_sync(
    warehouse: Path | Warehouse,
    settings: SourceSettings,
    *,
    progress: Any | None = None,
    wait_seconds: float = 0.0,
    on_namespace: Callable[[NamespaceOutcome], None] | None = None,
    resources: tuple[str, ...] | None = None,
    budget: Callable[[SourceSettings], Any] | None = None,
    restart: bool = False,
    replaying: Replaying | None = None,
) -> SyncResult:
    """Sync every namespace (or `settings.namespaces`) into the `raw` dataset of `warehouse`.

    `settings` are the source's, resolved once by the caller (see :func:`source_settings`).
    `resources` limits the load to those data resources (e.g. ``("documents",)``);
    the rows and history of the others are left untouched. `budget`, given the resolved
    settings, returns the account's shared request budget (or None), e.g.
    :func:`flows.budget.account_budget` under Prefect.

    Each namespace is loaded the moment its fetch is complete, while the others
    are still being read; `on_namespace` is called with its outcome right after its
    load committed (or, for a namespace that could not be read completely, right after
    its failure was recorded: nothing of its data is loaded, its history stays).

    An interrupted sync is resumed (see :mod:`diligence.resume`): the namespaces it had
    not committed are read from its evidence plus what they lack, those it had
    committed are not read again; `restart` starts from zero instead. `replaying` makes
    it a replay of a kept sync (nothing resumed).
    Raises :class:`SyncError` when the sync cannot run (credentials refused, service
    unreachable, a load that failed).
    """
    bound_process_memory()
    owner = warehouse if isinstance(warehouse, Warehouse) else Warehouse(warehouse)
    synced_at = replaying.synced_at if replaying else datetime.now(timezone.utc)
    sync_id = replaying.sync_id if replaying else synced_at.strftime("%Y%m%dT%H%M%S%fZ")
    outcomes: list[NamespaceOutcome] = []
    load_info: list[Any] = []
    stats: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    started = time.perf_counter()
    fetched = started
    head: str | None = None
    chain_break: str | None = None

    with owner.writing(wait_seconds=wait_seconds):
        staging = owner.staging_dir(sync_id)
        created = owner.path is not None and not owner.path.exists()
        if created:
            mark_creating(owner.path)  # `diligence status` says so meanwhile
        try:
            # The file is held from here to the end of the sync (created, for a new
            # warehouse): a reader that comes mid-fetch is told who writes it, or waits,
            # and never takes the file from under the sync's first load.
            with _loading(owner), kept_in_step(owner, modes=file_modes()) as bucket:
                plan = plan_resume(owner, settings, started_at=synced_at, resources=resources,
                                   restart=restart or replaying is not None)
                skipped = plan.skip
                with stream_namespaces(
                    settings,
                    staging_dir=staging,
                    known_namespaces=owner.synced_namespaces(),
                    progress=progress,
                    synced_at=synced_at,
                    on_stats=lambda client_stats: stats.update(client_stats.as_dict()),
                    budget=budget(settings) if budget is not None else None,
                    evidence=evidence_log(
                        owner, settings, sync_id=sync_id, synced_at=synced_at, resources=resources,
                        kept=plan.kept, kind="replay" if replaying else "sync",
                        extra={"replay_of": replaying.replay_of} if replaying else None,
                        bucket=bucket),
                    continued=plan.continued,
                    skip=plan.skip,
                    transport=replaying.transport if replaying else None,
                ) as stream:
                    for result in stream:
                        fetched = time.perf_counter()
                        began = time.perf_counter()
                        info, written = _commit(owner, stream, result, functools.partial(
                            company_connections, result, sync_id, synced_at, resources), synced_at)
                        load_info.append(info)
                        outcome = _outcome(result, datetime.now(timezone.utc),
                                           time.perf_counter() - began, resources)
                        outcome.versions_written = written
                        outcomes.append(outcome)
                        if outcome.status == "success":
                            log.info("namespace %s loaded: %d rows", outcome.namespace_company_id,
                                     outcome.rows)
                        if on_namespace is not None:
                            on_namespace(outcome)
                        if stream.fetching:
                            owner.checkpoint()  # nothing to load yet: the wait hides it
                head, chain_break = stream.head, stream.chain_break  # sealed as the stream closed
        except SyncError:
            raise
        except Exception as exc:
            if not _known(exc):
                raise
            raise SyncError(_describe(exc), path=staging, transient=_transient(exc)) from exc
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            if created and not outcomes:  # a sync refused at login leaves no file behind
                owner.remove_empty_file()
    finished = time.perf_counter()

    result = SyncResult(
        sync_id=sync_id,
        warehouse=owner.path if owner.path is not None else owner.display(),
        synced_at=synced_at,
        namespaces=outcomes,
        timings={"extract": fetched - started, "load": finished - fetched},
        load_info=load_info,
        request_stats=stats,
        resources=resources,
        not_read_again=skipped,
        evidence_head=head,
        evidence_break=chain_break,
    )
    for outcome in result.failed:
        log.error("namespace %s not loaded: %s", outcome.namespace_company_id, outcome.error)
    return result
