"""One sync: read every namespace, land it in `raw`, and say what happened.

The CLI (`diligence sync`) and the Prefect flow both call :func:`run_sync`.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
from dlt.common.configuration.exceptions import ConfigFieldMissingException
from dlt.common.pipeline import LoadInfo

from pipelines.company_connections import Extraction, ProgressListener, company_connections
from pipelines.company_connections.errors import DiligenceError

from .publish import wait_until_writable
from .warehouse import DEFAULT_WAREHOUSE, pipeline_for, writer_lock

log = logging.getLogger("diligence.sync")


class SyncError(RuntimeError):
    """A sync that could not run at all (credentials, service, configuration)."""


@dataclass
class NamespaceOutcome:
    """What a sync did for one namespace."""

    namespace_company_id: str
    status: str  # "success" | "failed"
    requests: int
    rows: int
    issues: int
    duration_seconds: float
    error: str | None = None


@dataclass
class SyncResult:
    """The outcome of :func:`run_sync`."""

    sync_id: str
    warehouse: Path
    synced_at: datetime
    namespaces: list[NamespaceOutcome]
    timings: dict[str, float] = field(default_factory=dict)
    load_info: LoadInfo | None = None

    @property
    def failed(self) -> list[NamespaceOutcome]:
        return [n for n in self.namespaces if n.status != "success"]

    @property
    def requests(self) -> int:
        return sum(n.requests for n in self.namespaces)

    @property
    def rows(self) -> int:
        return sum(n.rows for n in self.namespaces)


def _outcomes(extraction: Extraction) -> list[NamespaceOutcome]:
    outcomes = [
        NamespaceOutcome(
            namespace_company_id=s.namespace_company_id,
            status="success",
            requests=s.requests,
            rows=s.row_count,
            issues=len(s.issues),
            duration_seconds=((s.finished_at or s.started_at) - s.started_at).total_seconds(),
        )
        for s in extraction.snapshots.values()
    ]
    outcomes += [
        NamespaceOutcome(
            namespace_company_id=f.namespace_company_id,
            status="failed",
            requests=f.requests,
            rows=0,
            issues=0,
            duration_seconds=(f.finished_at - f.started_at).total_seconds(),
            error=f.error,
        )
        for f in extraction.failures.values()
    ]
    return outcomes


def _unwrap(exc: BaseException) -> BaseException:
    """The error that dlt wrapped, so users see the real cause in one line."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DiligenceError):
            return current
        exc = current
        current = current.__cause__ or current.__context__
    return exc


def _describe(exc: BaseException) -> str:
    cause = _unwrap(exc)
    missing = next(
        (e for e in (exc, cause) if isinstance(e, ConfigFieldMissingException)), None
    )
    if missing is not None:
        keys = ", ".join(missing.fields)
        env = ", ".join(f"SOURCES__COMPANY_CONNECTIONS__{k.upper()}" for k in missing.fields)
        return (
            f"missing setting {keys} of source company_connections: set it in "
            f".dlt/config.toml / .dlt/secrets.toml or as {env}"
        )
    if isinstance(cause, DiligenceError):
        return str(cause)
    return f"{type(cause).__name__}: {cause}"


def synced_namespaces(warehouse: Path) -> list[str]:
    """Namespaces that some earlier sync of `warehouse` loaded successfully."""
    if not warehouse.exists():
        return []
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        exists = con.execute(
            "select count(*) from information_schema.tables "
            "where table_schema = 'raw' and table_name = 'sync_runs'"
        ).fetchall()[0][0]
        if not exists:
            return []
        rows = con.execute(
            "select distinct namespace_company_id from raw.sync_runs where status = 'success' order by 1"
        ).fetchall()
    finally:
        con.close()
    return [row[0] for row in rows]


def run_sync(
    warehouse: Path = DEFAULT_WAREHOUSE,
    *,
    base_url: str | None = None,
    namespaces: list[str] | None = None,
    progress: ProgressListener | None = None,
    wait_seconds: float = 0.0,
    source_options: dict[str, Any] | None = None,
) -> SyncResult:
    """Sync every namespace (or `namespaces`) into the `raw` dataset of `warehouse`.

    Settings not given here come from dlt config (``.dlt/*.toml`` or env vars).
    Namespaces that could not be read completely are not loaded and are listed in
    :attr:`SyncResult.failed`; the others are loaded. Raises :class:`SyncError`
    when nothing could be read (credentials refused, service unreachable, bad
    configuration).
    """
    options: dict[str, Any] = dict(source_options or {})
    if base_url is not None:
        options["base_url"] = base_url
    if namespaces:
        options["namespaces"] = list(namespaces)
    synced_at = datetime.now(timezone.utc)
    sync_id = synced_at.strftime("%Y%m%dT%H%M%S%fZ")
    extracted: list[Extraction] = []
    timings: dict[str, float] = {}

    with writer_lock(warehouse, wait_seconds=wait_seconds):
        wait_until_writable(warehouse, wait_seconds=wait_seconds)
        pipeline = pipeline_for(warehouse)
        if pipeline.has_pending_data:
            # Left by a sync that died mid-way. This sync reads a complete, newer
            # snapshot of every namespace, which supersedes it; loading the old
            # package first would make dlt skip the new data (it loads pending
            # packages *instead of* extracting).
            log.warning("discarding the unfinished load of an interrupted sync")
            pipeline.drop_pending_packages()
        started = time.perf_counter()
        try:
            source = company_connections(
                **options,
                sync_id=sync_id,
                known_namespaces=synced_namespaces(warehouse),
                progress=progress,
                on_extracted=extracted.append,
            )
        except Exception as exc:  # noqa: BLE001 - turned into one clear line
            raise SyncError(_describe(exc)) from None
        timings["extract"] = time.perf_counter() - started
        extraction = extracted[0]
        started = time.perf_counter()
        try:
            load_info = pipeline.run(source, loader_file_format="parquet")
        except Exception as exc:  # noqa: BLE001
            raise SyncError(f"loading into {warehouse} failed: {_describe(exc)}") from None
        timings["load"] = time.perf_counter() - started

    result = SyncResult(
        sync_id=sync_id,
        warehouse=warehouse,
        synced_at=extraction.synced_at,
        namespaces=_outcomes(extraction),
        timings=timings,
        load_info=load_info,
    )
    for outcome in result.failed:
        log.error("namespace %s not loaded: %s", outcome.namespace_company_id, outcome.error)
    return result
