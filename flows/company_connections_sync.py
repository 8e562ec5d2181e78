"""Prefect flow `company-connections-sync`: sync, rebuild analytics, export, publish.

Each task calls one step of :mod:`diligence.steps`, the same steps as the `diligence`
CLI, in the same order: ``sync_step`` -> ``analytics_step`` (models, data checks, the
analysts' published copy) -> ``export_step``.

All namespaces are synced in ONE task run (``sync-namespaces``): one client, one login,
one concurrency limit, every namespace read side by side and each one committed the
moment it is complete. Each namespace's outcome is logged as it commits and reported
in the run's artifacts. A namespace that failed is read again, alone with the other
failed ones, by a further task run (``retry-failed-namespaces-<n>``) after a delay,
up to :data:`NAMESPACE_RETRY_DELAYS`; namespaces already loaded are not read again. A
namespace user-info does not list is never retried. A sync that cannot run at all
(service unreachable) is retried by Prefect when the error is transient. After the
sync, analytics and reports are rebuilt from what is in the warehouse, the artifacts
are published, and the run ends Failed, naming each namespace not loaded and each
failing check.

Credentials are never parameters: see :mod:`flows.service`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State
from prefect.states import Failed

from diligence.analytics import AnalyticsResult, warm_up
from diligence.analytics.checks import CheckResult, format_failures
from diligence.config import DEFAULT_LOCK_WAIT_SECONDS, DEFAULT_REPORTS_DIR
from diligence.evidence.chain import evidence_summary
from diligence.report.export import ExportResult, Format
from diligence.steps import analytics_step, export_step, report_step, sync_step
from diligence.sync import NamespaceOutcome
from diligence.warehouse import open_warehouse
from pipelines.company_connections import plan_namespaces

from .budget import account_budget
from .errors import NamespaceSyncError, RunFailedError
from .notify import notify_changes
from .report import expiring_documents, summary_markdown
from .retry import failure_of, first_attempt, retry_if_transient
from .service import configured_namespaces, flow_settings, mask, user_companies

FLOW_NAME = "company-connections-sync"
SUMMARY_ARTIFACT_KEY = "company-connections-sync-summary"
DOCUMENTS_ARTIFACT_KEY = "documents-expired-or-expiring"
DBT_BUILD_ARTIFACT_KEY = "dbt-build"
#: Seconds before each further attempt at the namespaces that failed.
NAMESPACE_RETRY_DELAYS: tuple[float, ...] = (30.0, 120.0)


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
    namespaces: list[str] | None, base_url: str | None, warehouse: str | None
) -> NamespacePlan:
    """The namespaces to sync (:func:`~pipelines.company_connections.plan_namespaces`):
    the parameter, else dlt config `namespaces`, else every company of user-info plus
    every namespace synced before (so one whose access was lost fails loudly instead of
    silently going stale). A namespace asked for that is neither fails the run."""
    logger = get_run_logger()
    available = user_companies(flow_settings(base_url))
    wanted = plan_namespaces(
        namespaces or configured_namespaces(), available, open_warehouse(warehouse).synced_namespaces()
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
    name="sync-namespaces",
    retries=2,
    retry_delay_seconds=[30, 120],
    retry_condition_fn=retry_if_transient,
    cache_policy=NO_CACHE,
)
def sync_namespaces(
    namespaces: list[str], available: list[str], warehouse: str | None, base_url: str | None,
    restart: bool = False,
) -> list[NamespaceOutcome]:
    """Sync `namespaces` side by side into `raw`, each committed as soon as it is read.

    What an interrupted sync left (its unsealed manifest) is resumed, unless `restart`; so is
    what an earlier attempt of this task left, since a retry never restarts.

    Returns every namespace's outcome (its previous data is kept when it failed); its
    outcome is also in `raw.sync_runs`, as with the CLI. Raises only when the sync
    cannot run at all (credentials, service unreachable, a failed load).
    """
    logger = get_run_logger()
    owner = open_warehouse(warehouse)
    known = set(owner.synced_namespaces())

    def report(outcome: NamespaceOutcome) -> None:
        if outcome.status == "success":
            logger.info(
                "namespace %s loaded: %d requests, %d rows, %d sync issues, %.1f s%s",
                outcome.namespace_company_id,
                outcome.requests,
                outcome.rows,
                outcome.issues,
                outcome.duration_seconds,
                f" (resumed: {outcome.requests_kept:,} requests kept)" if outcome.requests_kept else "",
            )
        else:
            logger.warning(  # one plain line in the Prefect UI, whatever the error's text
                "namespace %s not loaded, previous data kept: %s",
                outcome.namespace_company_id,
                " ".join(str(outcome.error).split()),
            )

    warm_up()  # dbt's imports and parse for the models task, while the sync waits on the service
    result = sync_step(
        owner,
        flow_settings(base_url, namespaces),
        wait_seconds=DEFAULT_LOCK_WAIT_SECONDS,
        budget=account_budget,
        on_namespace=report,
        restart=restart and first_attempt(),
    )
    outcomes = {o.namespace_company_id: o for o in result.namespaces}
    for namespace in namespaces:
        outcome = outcomes.get(namespace)
        if outcome is None or outcome.status == "success" or namespace in available:
            continue
        outcome.retryable = False
        if namespace in known:
            outcome.error = (
                f"namespace {namespace} was synced before but user-info no longer lists it "
                "(access lost?); its data is kept as last synced. To stop syncing it, set "
                "`namespaces` in the config or the flow parameter"
            )
    return [outcomes[ns] for ns in namespaces if ns in outcomes]


@task(
    name="rebuild-analytics",
    retries=2,
    retry_delay_seconds=30,
    retry_condition_fn=retry_if_transient,
    cache_policy=NO_CACHE,
)
def rebuild_analytics_schema(
    warehouse: str | None, expiring_within_days: int | None, full_refresh: bool = False
) -> AnalyticsResult:
    """Build the models (the dbt project, through dbtRunner), run the data checks (its
    tests) and, if they pass, publish the analysts' copy. `expiring_within_days` None:
    as configured; `full_refresh`: the history marts anew, not extended."""
    logger = get_run_logger()
    result = analytics_step(
        open_warehouse(warehouse),
        expiring_within_days=expiring_within_days,
        wait_seconds=DEFAULT_LOCK_WAIT_SECONDS,
        full_refresh=full_refresh,
    )
    logger.info(
        "models built: %s",
        ", ".join(f"{table} {rows}" for table, rows in result.models.row_counts.items()),
    )
    # the dbt build, model by model (one task: dbt builds beside analytics, then one swap)
    logger.info(
        "dbt build in %.2fs: %s",
        result.models.seconds,
        ", ".join(f"{model} {seconds:.2f}s" for model, seconds in result.models.timings.items()),
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
def export_run_reports(warehouse: str | None, reports_dir: str, export_formats: list[str]) -> ExportResult:
    """Write every report in every format into a new run folder under `reports_dir`
    (``<date>T<time>Z-<sync id>``; ``latest`` names it; see
    :mod:`diligence.report.folders`)."""
    exported = export_step(open_warehouse(warehouse), None, export_formats, reports_root=Path(reports_dir))
    get_run_logger().info("wrote %d report files into %s", len(exported.files), exported.folder)
    return exported


@task(name="write-html-report", cache_policy=NO_CACHE)
def write_run_report(warehouse: str | None, folder: Path) -> Path:
    """Write the HTML report into the run's folder, as `report.html`."""
    written = report_step(open_warehouse(warehouse), Path(folder) / "report.html")
    get_run_logger().info("wrote the HTML report %s", written.path)
    return written.path


@task(name="publish-summary", cache_policy=NO_CACHE)
def publish_run_summary(
    outcomes: list[NamespaceOutcome],
    analytics: AnalyticsResult,
    exported: ExportResult,
    report: Path | None = None,
    evidence: dict[str, Any] | None = None,
) -> UUID:
    """Markdown artifact: per namespace requests, rows, sync issues, duration, status; the
    evidence chain's head."""
    markdown = summary_markdown(
        outcomes,
        row_counts=analytics.models.row_counts,
        checks=analytics.checks,
        exported=exported.files,
        published=analytics.published,
        report=report,
        evidence=evidence,
    )
    return create_markdown_artifact(
        markdown=mask(markdown),
        key=SUMMARY_ARTIFACT_KEY,
        description="Per namespace: requests, rows, sync issues, duration and status",
    )


@task(name="publish-dbt-build", cache_policy=NO_CACHE)
def publish_dbt_build(analytics: AnalyticsResult) -> UUID:
    """Table artifact of the dbt build, node by node: each model with its seconds and
    rows, then each check with its failing rows (one task for the whole build: see
    docs/scheduling.md, "The dbt build in Prefect")."""
    models = analytics.models
    table: list[dict[str, Any]] = [
        {"node": f"model {model}", "seconds": round(seconds, 3),
         "rows": models.row_counts.get(model), "status": "built"}
        for model, seconds in models.timings.items()
    ]
    table += [
        {"node": f"check {check.name}", "seconds": None, "rows": check.failing_rows,
         "status": "pass" if check.passed else "fail"}
        for check in analytics.checks
    ]
    failed = len(analytics.failed_checks)
    return create_table_artifact(
        table=table,
        key=DBT_BUILD_ARTIFACT_KEY,
        description=(f"dbt build in {models.seconds:.1f} s: {len(models.timings)} models, "
                     f"{len(analytics.checks)} checks ({failed} failed)"),
    )


@task(name="publish-document-expiry", cache_policy=NO_CACHE)
def publish_document_expiry(warehouse: str | None, expiring_within_days: int) -> UUID:
    """Table artifact of the documents expired or expiring (from analytics.document_expiry)."""
    with open_warehouse(warehouse).session(read_only=True, memory_limit=None) as con:
        rows, total = expiring_documents(con)
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
    """Reject an unknown format before anything runs (the parameter is a plain list of
    :class:`~diligence.report.export.Format` values)."""
    unknown = sorted(set(export_formats) - {known.value for known in Format})
    if unknown:
        raise ValueError(
            f"unknown export format(s) {', '.join(unknown)}; expected {' or '.join(Format)}"
        )


def namespace_outcome(namespace: str, state: State[Any]) -> NamespaceOutcome:
    """The outcome of a namespace from a failed task state (e.g. the sync could not run)."""
    if state.is_completed():
        result = state.result()
        if isinstance(result, list):
            return next(o for o in result if o.namespace_company_id == namespace)
        return result
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


def sync_with_retries(plan: NamespacePlan, warehouse: str | None, base_url: str | None,
                      restart: bool = False) -> list[NamespaceOutcome]:
    """Sync every namespace of `plan` in one task run, then read only the failed ones again
    (resuming from what the failed attempt fetched; `restart` applies to the first only).

    Namespaces that failed for a reason another attempt may fix are read again (alone
    with the other failed ones) after each delay of :data:`NAMESPACE_RETRY_DELAYS`.
    """
    outcomes: dict[str, NamespaceOutcome] = {}
    pending = list(plan.namespaces)
    for attempt in range(len(NAMESPACE_RETRY_DELAYS) + 1):
        if attempt:
            time.sleep(NAMESPACE_RETRY_DELAYS[attempt - 1])
            step = sync_namespaces.with_options(task_run_name=f"retry-failed-namespaces-{attempt}")
        else:
            step = sync_namespaces
        state = step(pending, plan.available, warehouse, base_url, restart and not attempt,
                     return_state=True)
        if not state.is_completed():
            for namespace in pending:
                outcomes[namespace] = namespace_outcome(namespace, state)
            break
        for outcome in state.result():
            outcomes[outcome.namespace_company_id] = outcome
        pending = [
            o.namespace_company_id for o in outcomes.values() if o.status != "success" and o.retryable
        ]
        if not pending:
            break
    return [outcomes[ns] for ns in plan.namespaces if ns in outcomes]


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
        problems.append(format_failures(failing))
    if problems:
        raise RunFailedError(mask("; ".join(problems)))


# -- the flow --------------------------------------------------------------------------
@flow(name=FLOW_NAME)
def company_connections_sync(
    namespaces: list[str] | None = None,
    expiring_within_days: int | None = None,
    export_formats: list[str] = [fmt.value for fmt in Format],  # noqa: B006 - Prefect parameter default
    reports_dir: str = str(DEFAULT_REPORTS_DIR),
    warehouse: str | None = None,
    base_url: str | None = None,
    restart: bool = False,
    full_refresh: bool = False,
) -> RunSummary:
    """Sync the company-connections service into the DuckDB warehouse, rebuild the
    `analytics` schema (models, data checks, the analysts' published copy), export the
    reports into a new folder under `<reports_dir>/` (``<date>T<time>Z-<sync id>``, named
    by `<reports_dir>/latest`) and publish a summary and the expiring documents.

    Args:
        namespaces: company IDs to sync; default dlt config `namespaces`, else every
            `companyId` of user-info (and every namespace synced before).
        expiring_within_days: documents expiring within this many days are `expiring`;
            None: as configured, resolved by the build
            (:func:`diligence.config.expiring_within_days`).
        export_formats: report formats to write (:class:`~diligence.report.export.Format`:
            `csv`, `parquet`; default both).
        reports_dir: folder that receives one sub-folder per run and `latest`; config
            `[exports] keep` says how many are kept (default 30).
        warehouse: the DuckDB file (or a DuckLake URI); default config `[warehouse]
            location` or env DILIGENCE_WAREHOUSE, else data/warehouse.duckdb, as for the
            CLI.
        base_url: the service's URL; default dlt config `base_url`.
        restart: discard what an interrupted run left to resume and read everything
            (a retry of this run resumes all the same).
        full_refresh: build the history tables anew from all of raw instead of adding
            the syncs since their last build (the same tables; slower).
    """
    check_export_formats(export_formats)
    plan = resolve_namespaces(namespaces, base_url, warehouse)
    outcomes = sync_with_retries(plan, warehouse, base_url, restart and first_attempt())
    analytics = rebuild_analytics_schema(warehouse, expiring_within_days, full_refresh)
    days = analytics.models.expiring_within_days  # as resolved by the build
    exported = export_run_reports(warehouse, reports_dir, export_formats)
    report = write_run_report(warehouse, exported.folder)
    publish_run_summary(outcomes, analytics, exported, report, evidence_summary(open_warehouse(warehouse)))
    publish_dbt_build(analytics)
    publish_document_expiry(warehouse, days)
    notify_changes(warehouse, outcomes, return_state=True)
    try:
        raise_for_failures(outcomes, analytics.checks)
    except RunFailedError as exc:
        # The run ends Failed with the plain message: no traceback, no class name in the UI.
        get_run_logger().error("%s", exc)
        return Failed(message=str(exc))  # type: ignore[return-value]
    return RunSummary(
        namespaces=outcomes,
        row_counts=dict(analytics.models.row_counts),
        reports=[exported.folder],
        published=analytics.published,
    )


if __name__ == "__main__":
    company_connections_sync()
