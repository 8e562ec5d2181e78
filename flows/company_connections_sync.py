"""Prefect flow `company-connections-sync`: sync, rebuild analytics, export, publish.

Each task calls the same function as the `diligence` CLI, in the same order:
``run_sync`` -> ``rebuild_analytics`` (models, data checks, the analysts' published
copy) -> ``export_reports``.

Namespaces are synced one after another, each as its own task run (``sync-<id>``):
``run_sync`` holds the warehouse's writer lock for the whole sync, so concurrent
syncs of one warehouse would only queue on that lock. One task run per namespace
gives each namespace its own state, log and retries (only a failed namespace is read
again), and a failing namespace never stops the others; within a namespace the
requests still run concurrently. After every namespace has had its turn, analytics
and reports are rebuilt from what is in the warehouse, the artifacts are published,
and the run ends Failed, naming each namespace not loaded and each failing check.

Credentials are never parameters: see :mod:`flows.service`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, get_args
from uuid import UUID

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State

from diligence.analytics import AnalyticsResult, rebuild_analytics
from diligence.checks import CheckResult
from diligence.export import ExportedFile, Format, export_reports
from diligence.sync import NamespaceOutcome, run_sync, synced_namespaces

from .errors import NamespaceSyncError, RunFailedError, UnknownNamespaceError
from .report import expiring_documents, summary_markdown
from .retry import failure_of, retry_if_transient
from .service import configured_namespaces, credential_options, mask, user_companies

FLOW_NAME = "company-connections-sync"
SUMMARY_ARTIFACT_KEY = "company-connections-sync-summary"
DOCUMENTS_ARTIFACT_KEY = "documents-expired-or-expiring"
EXPORT_FORMATS: tuple[str, ...] = get_args(Format)
#: Seconds a step waits for another writer of the warehouse (a CLI sync, an open session).
LOCK_WAIT_SECONDS = 120.0


@dataclass(frozen=True)
class NamespacePlan:
    """The namespaces to sync, and those user-info lists."""

    namespaces: list[str]
    available: list[str]


@dataclass(frozen=True)
class RunSummary:
    """What a successful run returns."""

    namespaces: list[NamespaceOutcome]
    row_counts: dict[str, int]
    reports: list[Path] = field(default_factory=list)
    published: Path | None = None


# -- tasks -----------------------------------------------------------------------------
@task(
    name="resolve-namespaces",
    retries=2,
    retry_delay_seconds=[10, 60],
    retry_condition_fn=retry_if_transient,
    cache_policy=NO_CACHE,
)
def resolve_namespaces(
    namespaces: list[str] | None, base_url: str | None, warehouse: str
) -> NamespacePlan:
    """The namespaces to sync: the parameter, else dlt config `namespaces`, else every
    company of user-info plus every namespace synced before (so one whose access was
    lost fails loudly instead of silently going stale)."""
    logger = get_run_logger()
    available = user_companies(base_url=base_url, options=credential_options())
    wanted = list(
        dict.fromkeys(
            namespaces
            or configured_namespaces()
            or [*available, *synced_namespaces(Path(warehouse))]
        )
    )
    logger.info(
        "user-info lists %d namespaces; syncing %d: %s",
        len(available),
        len(wanted),
        ", ".join(wanted) or "none",
    )
    unknown = [ns for ns in wanted if ns not in available]
    if unknown:
        logger.warning("not listed by user-info: %s", ", ".join(unknown))
    return NamespacePlan(namespaces=wanted, available=available)


@task(
    name="sync-namespace",
    task_run_name="sync-{namespace}",
    retries=2,
    retry_delay_seconds=[30, 120],
    retry_condition_fn=retry_if_transient,
    cache_policy=NO_CACHE,
)
def sync_namespace(
    namespace: str, available: list[str], warehouse: str, base_url: str | None
) -> NamespaceOutcome:
    """Sync one namespace into `raw`; fail (keeping its previous data) if it could not be
    read. Its outcome is recorded in `raw.sync_runs` either way, as the CLI does."""
    logger = get_run_logger()
    result = run_sync(
        Path(warehouse),
        base_url=base_url,
        namespaces=[namespace],
        wait_seconds=LOCK_WAIT_SECONDS,
        source_options=credential_options(),
    )
    outcome = next(o for o in result.namespaces if o.namespace_company_id == namespace)
    if outcome.status != "success":
        if namespace in available:
            raise NamespaceSyncError(outcome)
        if namespace in synced_namespaces(Path(warehouse)):
            outcome.error = (
                f"namespace {namespace} was synced before but user-info no longer lists it "
                "(access lost?); its data is kept as last synced. To stop syncing it, set "
                "`namespaces` in the config or the flow parameter"
            )
        raise UnknownNamespaceError(outcome)
    logger.info(
        "namespace %s loaded: %d requests, %d rows, %d sync issues, %.1f s",
        namespace,
        outcome.requests,
        outcome.rows,
        outcome.issues,
        outcome.duration_seconds,
    )
    return outcome


@task(
    name="rebuild-analytics",
    retries=2,
    retry_delay_seconds=30,
    retry_condition_fn=retry_if_transient,
    cache_policy=NO_CACHE,
)
def rebuild_analytics_schema(warehouse: str, expiring_within_days: int) -> AnalyticsResult:
    """Build the models, run the data checks and, if they pass, publish the analysts' copy."""
    logger = get_run_logger()
    result = rebuild_analytics(
        Path(warehouse),
        expiring_within_days=expiring_within_days,
        wait_seconds=LOCK_WAIT_SECONDS,
    )
    logger.info(
        "models built: %s",
        ", ".join(f"{table} {rows}" for table, rows in result.models.row_counts.items()),
    )
    for check in result.failed_checks:
        logger.warning("data check %s failed: %d rows", check.name, check.failing_rows)
    if result.failed_checks:
        logger.warning("the analysts' copy was not replaced: data checks failed")
    else:
        logger.info("all %d data checks passed; published %s", len(result.checks), result.published)
    return result


@task(
    name="export-reports",
    retries=2,
    retry_delay_seconds=30,
    retry_condition_fn=retry_if_transient,
    cache_policy=NO_CACHE,
)
def export_dated_reports(
    warehouse: str, reports_dir: str, export_formats: list[str], day: date | None = None
) -> list[ExportedFile]:
    """Write every report in every format into `<reports_dir>/<YYYY-MM-DD>/` (default: today)."""
    logger = get_run_logger()
    folder = Path(reports_dir) / (day or date.today()).isoformat()
    exported: list[ExportedFile] = []
    for fmt in dict.fromkeys(export_formats):
        exported += export_reports(Path(warehouse), folder, fmt)  # type: ignore[arg-type]
    logger.info("wrote %d report files into %s", len(exported), folder)
    return exported


@task(name="publish-summary", cache_policy=NO_CACHE)
def publish_run_summary(
    outcomes: list[NamespaceOutcome], analytics: AnalyticsResult, exported: list[ExportedFile]
) -> UUID:
    """Markdown artifact: per namespace requests, rows, sync issues, duration, status."""
    markdown = summary_markdown(
        outcomes,
        row_counts=analytics.models.row_counts,
        checks=analytics.checks,
        exported=exported,
        published=analytics.published,
    )
    return create_markdown_artifact(
        markdown=mask(markdown),
        key=SUMMARY_ARTIFACT_KEY,
        description="Per namespace: requests, rows, sync issues, duration and status",
    )


@task(name="publish-document-expiry", cache_policy=NO_CACHE)
def publish_document_expiry(warehouse: str, expiring_within_days: int) -> UUID:
    """Table artifact of the documents expired or expiring (from analytics.document_expiry)."""
    rows, total = expiring_documents(Path(warehouse))
    shown = f"the {len(rows)} most urgent of " if len(rows) < total else ""
    return create_table_artifact(
        table=rows,
        key=DOCUMENTS_ARTIFACT_KEY,
        description=(
            f"Documents expired or expiring within {expiring_within_days} days: "
            f"{shown}{total}, most urgent first"
        ),
    )


# -- helpers of the flow ---------------------------------------------------------------
def check_export_formats(export_formats: list[str]) -> None:
    """Reject an unknown format before anything runs (the parameter is a plain list)."""
    unknown = sorted(set(export_formats) - set(EXPORT_FORMATS))
    if unknown:
        raise ValueError(
            f"unknown export format(s) {', '.join(unknown)}; expected {' or '.join(EXPORT_FORMATS)}"
        )


def namespace_outcome(namespace: str, state: State[Any]) -> NamespaceOutcome:
    """The outcome of a namespace's sync task run, also when the task run failed."""
    if state.is_completed():
        return state.result()
    error = failure_of(state)
    if isinstance(error, NamespaceSyncError):
        return error.outcome
    return NamespaceOutcome(
        namespace_company_id=namespace,
        status="failed",
        requests=0,
        rows=0,
        issues=0,
        duration_seconds=0.0,
        error=str(error) if error is not None else (state.message or state.name),
    )


def raise_for_failures(outcomes: list[NamespaceOutcome], checks: list[CheckResult]) -> None:
    """Raise :class:`RunFailedError` naming every namespace not loaded and failing check."""
    failed = [o for o in outcomes if o.status != "success"]
    failing = [c for c in checks if c.failing_rows]
    problems = []
    if failed:
        problems.append(
            f"{len(failed)} of {len(outcomes)} namespaces not loaded (previous data kept): "
            + ", ".join(f"{o.namespace_company_id} ({o.error})" for o in failed)
        )
    if failing:
        problems.append(
            f"{len(failing)} data checks failed: "
            + ", ".join(f"{c.name} ({c.failing_rows} rows)" for c in failing)
        )
    if problems:
        raise RunFailedError(mask("; ".join(problems)))


# -- the flow --------------------------------------------------------------------------
@flow(name=FLOW_NAME)
def company_connections_sync(
    namespaces: list[str] | None = None,
    expiring_within_days: int = 30,
    export_formats: list[str] = ["csv", "parquet"],  # noqa: B006 - Prefect parameter default
    reports_dir: str = "reports",
    warehouse: str = "data/warehouse.duckdb",
    base_url: str | None = None,
) -> RunSummary:
    """Sync the company-connections service into the DuckDB warehouse, rebuild the
    `analytics` schema (models, data checks, the analysts' published copy), export the
    reports into `<reports_dir>/<YYYY-MM-DD>/` and publish a summary and the expiring
    documents.

    Args:
        namespaces: company IDs to sync; default dlt config `namespaces`, else every
            `companyId` of user-info (and every namespace synced before).
        expiring_within_days: documents expiring within this many days are `expiring`.
        export_formats: report formats to write (`csv`, `parquet`).
        reports_dir: folder that receives one dated sub-folder per run.
        warehouse: the DuckDB file.
        base_url: the service's URL; default dlt config `base_url`.
    """
    check_export_formats(export_formats)
    plan = resolve_namespaces(namespaces, base_url, warehouse)
    outcomes = [
        namespace_outcome(
            namespace,
            sync_namespace(namespace, plan.available, warehouse, base_url, return_state=True),
        )
        for namespace in plan.namespaces
    ]
    analytics = rebuild_analytics_schema(warehouse, expiring_within_days)
    exported = export_dated_reports(warehouse, reports_dir, export_formats)
    publish_run_summary(outcomes, analytics, exported)
    publish_document_expiry(warehouse, expiring_within_days)
    raise_for_failures(outcomes, analytics.checks)
    return RunSummary(
        namespaces=outcomes,
        row_counts=dict(analytics.models.row_counts),
        reports=sorted({f.path.parent for f in exported}),
        published=analytics.published,
    )


if __name__ == "__main__":
    company_connections_sync()
