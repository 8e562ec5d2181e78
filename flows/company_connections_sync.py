"""Prefect flow `company-connections-sync`: sync, rebuild analytics, export, publish.

Each task calls one step of :mod:`diligence.steps`, the same steps as the `diligence`
CLI, in the same order and under the same rules: ``sync_step`` -> ``analytics_step``
(models, data checks, the analysts' published copy) -> ``export_step`` -> ``report_step``.

All namespaces are synced in ONE task run (``sync-namespaces``): one client, one login,
one concurrency limit, every namespace read side by side and each one committed the
moment it is complete. Each namespace's outcome is logged as it commits and reported
in the run's artifacts. When a namespace failed for a reason another attempt may fix,
the task fails and Prefect retries it after each delay of
:data:`NAMESPACE_RETRY_DELAYS`; a retry reads only the namespaces not loaded yet
(:class:`SyncAttempts` keeps each one's outcome across the attempts), never those
already loaded nor one that user-info does not list. A sync that cannot run at all
(service unreachable) is retried the same way when the error is transient.

A sync that loaded no namespace builds, exports and reports nothing
(:func:`diligence.steps.nothing_loaded`, as for the CLI): the summary is published and
the run ends Failed, naming each namespace. Otherwise analytics and reports are rebuilt
from what is in the warehouse, the artifacts are published, and the run ends Failed
when a namespace was not loaded or a check failed, naming each
(:func:`diligence.steps.failure_message`, the CLI's words).

Credentials are never parameters: see :mod:`flows.service`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import UUID

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import State
from prefect.states import Failed

from diligence.config import DEFAULT_LOCK_WAIT_SECONDS, DEFAULT_REPORTS_DIR
from diligence.readouts import evidence_of
from diligence.steps import (
    analytics_step,
    check_export_formats,
    export_step,
    failed_outcome,
    failure_message,
    known_export_formats,
    nothing_loaded,
    open_warehouse,
    report_step,
    sync_step,
    warm_up,
)
from pipelines.company_connections import plan_namespaces

from .budget import account_budget
from .errors import NamespacesNotLoadedError, RunFailedError
from .notify import notify_changes
from .report import expiring_documents_table, summary_markdown
from .retry import failure_of, first_attempt, retry_if_transient
from .service import configured_namespaces, flow_settings, mask, user_companies

if TYPE_CHECKING:
    from collections.abc import Sequence

    from diligence.steps import AnalyticsResult, CheckResult, ExportResult, NamespaceOutcome

FLOW_NAME = "company-connections-sync"
SUMMARY_ARTIFACT_KEY = "company-connections-sync-summary"
DOCUMENTS_ARTIFACT_KEY = "documents-expired-or-expiring"
DBT_BUILD_ARTIFACT_KEY = "dbt-build"
#: Seconds before each further attempt at the namespaces not loaded (Prefect's retries of
#: ``sync-namespaces``).
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


@dataclass
class SyncAttempts:
    """The namespaces of one run's sync and what its attempts did with each: Prefect calls
    a task again with the same arguments, so every attempt of ``sync-namespaces`` sees this
    same object, and reads only what is still :meth:`pending` in it."""

    plan: NamespacePlan
    #: namespace -> the outcome of its latest attempt
    outcomes: dict[str, NamespaceOutcome] = field(default_factory=dict)
    #: the namespaces a sync that ran was given (one an interrupted sync had committed
    #: is not read again, so it has no outcome)
    synced: set[str] = field(default_factory=set)

    def pending(self) -> list[str]:
        """The namespaces the next attempt reads: those that failed for a reason another
        attempt may fix, and those of no outcome that no sync ran for (the attempt that
        should have read them could not run, or ended first)."""
        pending = []
        for ns in self.plan.namespaces:
            outcome = self.outcomes.get(ns)
            if outcome is None and ns not in self.synced or (
                outcome is not None and outcome.status != "success" and outcome.retryable
            ):
                pending.append(ns)
        return pending

    def final(self, state: State[Any]) -> list[NamespaceOutcome]:
        """Each namespace's outcome once the task run (in `state`) is over: its latest
        attempt's, else, when no sync ran for it, the failure that stopped the task."""
        return [
            self.outcomes[ns] if ns in self.outcomes else failed_outcome(ns, failure_text(state))
            for ns in self.plan.namespaces
            if ns in self.outcomes or ns not in self.synced
        ]


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
    retries=len(NAMESPACE_RETRY_DELAYS),
    retry_delay_seconds=list(NAMESPACE_RETRY_DELAYS),
    retry_condition_fn=retry_if_transient,
    cache_policy=NO_CACHE,
)
def sync_namespaces(
    attempts: SyncAttempts, warehouse: str | None, base_url: str | None, restart: bool = False
) -> list[NamespaceOutcome]:
    """Sync the namespaces still pending in `attempts` side by side into `raw`, each
    committed as soon as it is read, and record each one's outcome in `attempts` (its
    previous data is kept when it failed; its outcome is also in `raw.sync_runs`, as with
    the CLI).

    What an interrupted sync left (its unsealed manifest) is resumed, unless `restart` (on
    the first attempt only); so is what an earlier attempt of this task left.

    Returns every namespace's outcome. Raises :class:`NamespacesNotLoadedError` (transient:
    Prefect tries again, and the next attempt reads only those) when a namespace failed
    for a reason another attempt may fix, and the sync's own error when it cannot run at
    all (credentials, service unreachable, a failed load).
    """
    logger = get_run_logger()
    pending = attempts.pending()
    if not first_attempt():
        logger.info("reading again the namespaces not loaded: %s", ", ".join(pending))
    owner = open_warehouse(warehouse)
    known = set(owner.synced_namespaces())

    def record(outcome: NamespaceOutcome) -> None:
        """Keep the outcome of a namespace in `attempts` as it commits, and log it."""
        namespace = outcome.namespace_company_id
        if outcome.status != "success" and namespace not in attempts.plan.available:
            outcome.retryable = False  # not the user's: another attempt cannot help
            if namespace in known:
                outcome.error = (
                    f"namespace {namespace} was synced before but user-info no longer lists it "
                    "(access lost?); its data is kept as last synced. To stop syncing it, set "
                    "`namespaces` in the config or the flow parameter"
                )
        attempts.outcomes[namespace] = outcome
        if outcome.status == "success":
            logger.info(
                "namespace %s loaded: %d requests, %d rows, %d sync issues, %.1f s%s",
                namespace,
                outcome.requests,
                outcome.rows,
                outcome.issues,
                outcome.duration_seconds,
                f" (resumed: {outcome.requests_kept:,} requests kept)" if outcome.requests_kept else "",
            )
        else:
            logger.warning(  # one plain line in the Prefect UI, whatever the error's text
                "namespace %s not loaded, previous data kept: %s", namespace, " ".join(str(outcome.error).split())
            )

    warm_up()  # the models task's process: dbt's imports and parse while the sync waits on the service
    sync_step(
        owner,
        flow_settings(base_url, pending),
        wait_seconds=DEFAULT_LOCK_WAIT_SECONDS,
        budget=account_budget,
        on_namespace=record,
        restart=restart and first_attempt(),
    )
    attempts.synced.update(pending)
    again = [attempts.outcomes[ns] for ns in attempts.pending()]
    if again:
        raise NamespacesNotLoadedError(again)
    return [attempts.outcomes[ns] for ns in attempts.plan.namespaces if ns in attempts.outcomes]


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
    :func:`diligence.steps.export_step`)."""
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
    analytics: AnalyticsResult | None = None,
    exported: ExportResult | None = None,
    report: Path | None = None,
    evidence: dict[str, Any] | None = None,
) -> UUID:
    """Markdown artifact: per namespace requests, rows, sync issues, duration, status; the
    models, checks and reports (None: not built, the sync loaded nothing); the evidence
    chain's head."""
    markdown = summary_markdown(
        outcomes,
        row_counts=dict(analytics.models.row_counts) if analytics is not None else None,
        checks=analytics.checks if analytics is not None else (),
        exported=exported.files if exported is not None else (),
        published=analytics.published if analytics is not None else None,
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
    rows, total = expiring_documents_table(open_warehouse(warehouse))
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
def failure_text(state: State[Any]) -> str:
    """Why a task run ended in `state`: its error's one line, else the state's message."""
    error = failure_of(state)
    return str(error) if error is not None else (state.message or state.name)


def failed_run(outcomes: Sequence[NamespaceOutcome], checks: Sequence[CheckResult] = ()) -> State[Any] | None:
    """The Failed state a run ends in when a namespace was not loaded or a check failed:
    :func:`~diligence.steps.failure_message` (the CLI's words), masked and logged as one
    plain line, no traceback nor class name in the UI; its result raises
    :class:`RunFailedError`. None when nothing failed."""
    message = failure_message(outcomes, checks)
    if not message:
        return None
    failure = RunFailedError(mask(message))
    get_run_logger().error("%s", failure)
    return Failed(message=str(failure), data=failure)


# -- the flow --------------------------------------------------------------------------
@flow(name=FLOW_NAME)
def company_connections_sync(
    namespaces: list[str] | None = None,
    expiring_within_days: int | None = None,
    export_formats: list[str] = known_export_formats(),  # noqa: B008 - Prefect parameter default
    reports_dir: str = str(DEFAULT_REPORTS_DIR),
    warehouse: str | None = None,
    base_url: str | None = None,
    restart: bool = False,
    full_refresh: bool = False,
) -> RunSummary:
    """Sync the company-connections service into the DuckDB warehouse, rebuild the
    `analytics` schema (models, data checks, the analysts' published copy), export the
    reports into a new folder under `<reports_dir>/` (``<date>T<time>Z-<sync id>``, named
    by `<reports_dir>/latest`) and publish a summary and the expiring documents. A sync
    that loaded no namespace builds, exports and reports nothing: the run publishes its
    summary and ends Failed, naming each namespace.

    Args:
        namespaces: company IDs to sync; default dlt config `namespaces`, else every
            `companyId` of user-info (and every namespace synced before).
        expiring_within_days: documents expiring within this many days are `expiring`;
            None: as configured, resolved by the build
            (:func:`diligence.config.expiring_within_days`).
        export_formats: report formats to write (`csv`, `parquet`; default every format
            of :func:`diligence.steps.known_export_formats`).
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
    attempts = SyncAttempts(plan)
    synced = sync_namespaces(attempts, warehouse, base_url, restart and first_attempt(), return_state=True)
    outcomes = attempts.final(synced)
    if nothing_loaded(outcomes):
        publish_run_summary(outcomes, evidence=evidence_of(open_warehouse(warehouse)))
        notify_changes(warehouse, outcomes, return_state=True)
        return failed_run(outcomes) or RunSummary(namespaces=outcomes, row_counts={})  # type: ignore[return-value]
    analytics = rebuild_analytics_schema(warehouse, expiring_within_days, full_refresh)
    exported = export_run_reports(warehouse, reports_dir, export_formats)
    report = write_run_report(warehouse, exported.folder)
    publish_run_summary(outcomes, analytics, exported, report, evidence_of(open_warehouse(warehouse)))
    publish_dbt_build(analytics)
    publish_document_expiry(warehouse, analytics.models.expiring_within_days)  # as resolved by the build
    notify_changes(warehouse, outcomes, return_state=True)
    return failed_run(outcomes, analytics.checks) or RunSummary(  # type: ignore[return-value]
        namespaces=outcomes,
        row_counts=dict(analytics.models.row_counts),
        reports=[exported.folder],
        published=analytics.published,
    )


if __name__ == "__main__":
    company_connections_sync()
