"""Prefect fan-out for a DuckLake warehouse: one flow run per namespace on a work pool.

::

    company-connections-fanout (parent, deployment company-connections-fanout)
      resolve namespaces (parameter, config, else user-info)
      prepare the lake once (catalog, `raw` schema) so writers never race to create it
      run_deployment(company-connections-namespace/company-connections-namespace) x N
        -> each: `sync_step` of ONE namespace, on whichever process worker picks it up
      wait for all of them (Prefect's wait_for_flow_run: the server's events)
      models, checks, exports, HTML report, summary: once (the single writer of analytics)

Each namespace's run writes the lake through its own dlt pipeline (own name, pipelines
dir and staging dataset), so runs on many workers at once lose and duplicate nothing;
transient DuckLake commit conflicts are retried. The rules between the steps are those
of the CLI and the one-process flow (:mod:`diligence.steps`): when no namespace was
loaded, nothing is built, exported or reported, the summary is published and the run
ends Failed naming each namespace. For the DuckDB file warehouse (one writer), the
single-process flow :mod:`flows.company_connections_sync` stays the default deployment.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prefect import flow, get_client, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from prefect.deployments import run_deployment
from prefect.flow_runs import wait_for_flow_run
from prefect.utilities.asyncutils import run_coro_as_sync

from diligence.config import DEFAULT_LOCK_WAIT_SECONDS, DEFAULT_REPORTS_DIR
from diligence.errors import NamespaceSyncError
from diligence.readouts import evidence_of, recorded_outcomes
from diligence.steps import (
    analytics_step,
    check_export_formats,
    export_step,
    failed_outcome,
    known_export_formats,
    nothing_loaded,
    open_warehouse,
    report_step,
    sync_step,
)
from pipelines.company_connections import plan_namespaces

from .budget import account_budget
from .company_connections_sync import failed_run, publish_dbt_build, publish_run_summary
from .retry import first_attempt
from .service import configured_namespaces, flow_settings, user_companies

if TYPE_CHECKING:
    from uuid import UUID

    from prefect.client.schemas.objects import FlowRun, State

    from diligence.steps import NamespaceOutcome, Warehouse

FANOUT_FLOW_NAME = "company-connections-fanout"
NAMESPACE_FLOW_NAME = "company-connections-namespace"
#: ``<flow name>/<deployment name>`` of the per-namespace deployment in prefect.yaml
NAMESPACE_DEPLOYMENT = f"{NAMESPACE_FLOW_NAME}/{NAMESPACE_FLOW_NAME}"
#: Seconds the parent waits for all namespace runs.
WAIT_SECONDS = 6 * 3600


def owner_of(warehouse: str | None, data_path: str | None, pipelines_dir: str | None) -> Warehouse:
    """The warehouse of the parameters, else of the settings, as for the CLI (dlt's
    working folders under `pipelines_dir`)."""
    return open_warehouse(
        warehouse, data_path, pipelines_root=Path(pipelines_dir) if pipelines_dir else None
    )


@flow(name=NAMESPACE_FLOW_NAME)
def sync_one_namespace(
    namespace: str,
    warehouse: str | None = None,
    data_path: str | None = None,
    base_url: str | None = None,
    pipelines_dir: str | None = None,
    restart: bool = False,
) -> dict[str, Any]:
    """Sync ONE namespace into the warehouse's `raw` (one worker's share of a fan-out).

    Fails (and is retried by Prefect when the cause is transient) when the namespace
    could not be read completely; its previous data is then kept. A retry resumes
    from what the failed run fetched (its manifest, in the evidence store); `restart`
    discards that on the first run only."""
    logger = get_run_logger()
    result = sync_step(
        owner_of(warehouse, data_path, pipelines_dir),
        flow_settings(base_url, [namespace]),
        wait_seconds=DEFAULT_LOCK_WAIT_SECONDS,
        budget=account_budget,
        restart=restart and first_attempt(),
    )
    outcome = next(o for o in result.namespaces if o.namespace_company_id == namespace)
    if outcome.status != "success":
        raise NamespaceSyncError(outcome)
    logger.info(
        "namespace %s loaded: %d requests, %d rows in %.1f s (load %.1f s)%s",
        namespace, outcome.requests, outcome.rows, outcome.duration_seconds,
        outcome.load_seconds,
        f"; resumed: {outcome.requests_kept:,} requests kept" if outcome.requests_kept else "",
    )
    return {"namespace": namespace, "requests": outcome.requests, "rows": outcome.rows,
            "load_seconds": outcome.load_seconds}


@task(name="prepare-warehouse", retries=2, retry_delay_seconds=10, cache_policy=NO_CACHE)
def prepare_warehouse(warehouse: str | None, data_path: str | None, pipelines_dir: str | None) -> None:
    """Check the location and create the lake's catalog and `raw` once, before the writers."""
    with owner_of(warehouse, data_path, pipelines_dir).writing(wait_seconds=DEFAULT_LOCK_WAIT_SECONDS):
        pass


def fan_out(
    namespaces: list[str], parameters: dict[str, Any], deployment: str
) -> dict[str, State[Any]]:
    """Start one run of `deployment` per namespace, all at once, and wait for all of them
    (at most :data:`WAIT_SECONDS`); their final states."""
    runs = {
        ns: run_deployment(
            deployment,
            parameters={**parameters, "namespace": ns},
            timeout=0,  # submit only: the runs go side by side
            flow_run_name=f"namespace-{ns}",
        )
        for ns in namespaces
    }
    finished = run_coro_as_sync(_finished_runs([run.id for run in runs.values()]))
    return {ns: run.state for ns, run in zip(runs, finished or [], strict=True)}


async def _finished_runs(run_ids: list[UUID]) -> list[FlowRun]:
    """The flow runs `run_ids` once each is final, as Prefect's server announces it."""
    async with get_client() as client:
        return list(await asyncio.gather(
            *(wait_for_flow_run(run_id, timeout=WAIT_SECONDS, client=client) for run_id in run_ids)
        ))


def outcomes_of(owner: Warehouse, states: dict[str, State[Any]], since: datetime) -> list[NamespaceOutcome]:
    """Each namespace's outcome: as its run recorded it in `raw.sync_runs` since `since`,
    or (when its run failed before recording one) its run's final state."""
    recorded = recorded_outcomes(owner, since)
    return [
        recorded[ns] if ns in recorded and state.is_completed()
        else failed_outcome(ns, state.message or state.name)
        for ns, state in states.items()
    ]


@flow(name=FANOUT_FLOW_NAME)
def company_connections_fanout(
    warehouse: str | None = None,
    data_path: str | None = None,
    namespaces: list[str] | None = None,
    expiring_within_days: int | None = None,
    export_formats: list[str] = known_export_formats(),  # noqa: B008 - Prefect parameter default
    reports_dir: str = str(DEFAULT_REPORTS_DIR),
    base_url: str | None = None,
    pipelines_dir: str | None = None,
    namespace_deployment: str = NAMESPACE_DEPLOYMENT,
    restart: bool = False,
) -> dict[str, Any]:
    """Fan the sync out over a work pool (one run per namespace), then build the
    analytics, run the checks, export the reports and write the HTML report once.

    Args:
        warehouse: a DuckLake URI ``ducklake:postgres:<conninfo>`` (or a DuckDB file,
            whose one writer lock then serialises the namespace runs); default config
            `[warehouse] location` or env DILIGENCE_WAREHOUSE, as for the CLI.
        data_path: the lake's Parquet files (a directory or an object-storage URL);
            default config `[warehouse] data_path` or env DILIGENCE_DATA_PATH.
        namespaces: company IDs; default dlt config `namespaces`, else user-info's
            companies plus every namespace synced before (lost access fails loudly).
        expiring_within_days: None: as configured, resolved by the build
            (:func:`diligence.config.expiring_within_days`).
        pipelines_dir: dlt's working folders (default beside the data folder).
        namespace_deployment: ``flow/deployment`` run once per namespace.
        restart: the namespace runs discard what interrupted runs left to resume.
    """
    logger = get_run_logger()
    check_export_formats(export_formats)
    started = datetime.now(timezone.utc)
    owner = owner_of(warehouse, data_path, pipelines_dir)
    prepare_warehouse(warehouse, data_path, pipelines_dir)
    wanted = plan_namespaces(
        namespaces or configured_namespaces(),
        user_companies(flow_settings(base_url)),
        owner.synced_namespaces(),
    )
    logger.info("fanning out %d namespaces onto %s", len(wanted), namespace_deployment)
    states = fan_out(
        wanted,
        {"warehouse": warehouse, "data_path": data_path, "base_url": base_url,
         "pipelines_dir": pipelines_dir, "restart": restart and first_attempt()},
        namespace_deployment,
    )
    outcomes = outcomes_of(owner, states, started)
    if nothing_loaded(outcomes):
        publish_run_summary(outcomes, evidence=evidence_of(owner))
        return failed_run(outcomes) or {"namespaces": {}, "row_counts": {}}  # type: ignore[return-value]
    analytics = analytics_step(
        owner, expiring_within_days=expiring_within_days, wait_seconds=DEFAULT_LOCK_WAIT_SECONDS
    )
    exported = export_step(owner, None, export_formats, reports_root=Path(reports_dir))
    report = report_step(owner, exported.folder / "report.html")
    publish_run_summary(outcomes, analytics, exported, report.path, evidence_of(owner))
    publish_dbt_build(analytics)
    return failed_run(outcomes, analytics.checks) or {  # type: ignore[return-value]
        "namespaces": {o.namespace_company_id: o.status for o in outcomes},
        "row_counts": dict(analytics.models.row_counts),
    }
