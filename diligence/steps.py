"""The pipeline, composed once: sync -> models -> checks -> publish -> exports -> report.

::

    run_pipeline(warehouse, ...)
      sync_step       every namespace read concurrently, each committed on completion
      [downloads]     new or changed document files (CLI --download-documents)
      analytics_step  models in one transaction, data checks, the analysts' copy, compaction
      export_step     CSV / Parquet reports
      report_step     the self-contained HTML report

The CLI (`diligence sync`, `diligence demo`) calls :func:`run_pipeline`; the Prefect
flow calls the same steps one by one as tasks (it needs their states and retries).
One :class:`~diligence.warehouse.Warehouse` owns the file for the whole pipeline: the
writer lock is taken once and every step reuses it.

The rules between the steps are made here once, for the CLI and both flows:

* :func:`nothing_loaded`: a sync that loaded nothing (every namespace failed, or none to
  sync) builds, exports, reports and publishes nothing; the warehouse and the analysts'
  copy stay as they were.
* :func:`failure_message`: the one wording of what failed (each namespace not loaded,
  with why, and each failing check): the CLI's error line, the flows' Failed state.

A sync that could not run at all is recorded for ``diligence status``
(:mod:`diligence.attempts`) before its error goes up. The flows reach the library
through this module (and :mod:`diligence.readouts`): the warehouse (:func:`open_warehouse`),
the source's settings, the export formats, the outcome of a namespace that failed
before its sync could record one.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .attempts import record_failed_attempt
from .config import DEFAULT_REPORTS_DIR, analytics_timezone, exports_keep
from .config import csv_raw as configured_csv_raw
from .config import expiring_within_days as configured_expiry
from .errors import DbtError, RegisterError, SyncError, WarehouseNotReadyError
from .readouts import evidence_of
from .warehouse import DEFAULT_WAREHOUSE, Warehouse, open_warehouse
from .words import counted

if TYPE_CHECKING:  # also the types the flows annotate with: they import them from here
    from pipelines.company_connections import SourceSettings

    from .analytics import AnalyticsResult
    from .analytics.checks import CheckResult
    from .analytics.register import RegisterResult
    from .documents import DownloadSummary
    from .report.export import ExportedFile, ExportResult, Format
    from .report.page import ReportResult
    from .sync import NamespaceOutcome, SyncResult

__all__ = [
    "PipelineResult",
    "Warehouse",
    "analytics_step",
    "check_export_formats",
    "export_step",
    "failed_outcome",
    "failure_message",
    "known_export_formats",
    "nothing_loaded",
    "open_warehouse",
    "register_of",
    "register_step",
    "report_step",
    "run_pipeline",
    "source_settings",
    "sync_step",
    "warm_up",
]


@dataclass
class PipelineResult:
    """What :func:`run_pipeline` did, step by step (None: the step did not run)."""

    sync: SyncResult | None = None
    downloads: DownloadSummary | None = None
    analytics: AnalyticsResult | None = None
    exported: list[ExportedFile] = field(default_factory=list)
    #: the folder the exports are in (None: no export ran)
    export_folder: Path | None = None
    report: ReportResult | None = None
    #: seconds spent waiting for another writer of the warehouse (0: none)
    waited_seconds: float = 0.0

    @property
    def nothing_loaded(self) -> bool:
        """True when the sync ran and loaded no namespace (so nothing else ran, see
        :func:`nothing_loaded`)."""
        return self.sync is not None and nothing_loaded(self.sync.namespaces)

    @property
    def failure(self) -> str:
        """What failed, worded by :func:`failure_message` ("" when nothing did)."""
        return failure_message(self.sync.namespaces if self.sync is not None else (),
                               self.analytics.checks if self.analytics is not None else ())


# -- the rules between the steps -------------------------------------------------------
def nothing_loaded(outcomes: Sequence[NamespaceOutcome]) -> bool:
    """True when a sync with these namespace outcomes loaded none (every one failed, or
    there was none to sync): then nothing after the sync runs, neither models nor
    exports nor the report, and nothing is published."""
    return not any(o.status == "success" for o in outcomes)


def failure_message(outcomes: Sequence[NamespaceOutcome], checks: Sequence[CheckResult] = ()) -> str:
    """The one wording of what failed in a run, for the CLI's error line and the flows'
    Failed state: each namespace not loaded, with why (led by "nothing loaded, nothing
    built or published" when none was), then each failing data check; "" when nothing
    failed."""
    failed = [o for o in outcomes if o.status != "success"]
    failing = [c for c in checks if not c.passed]
    problems = []
    if failed:
        lead = "nothing loaded, nothing built or published: " if nothing_loaded(outcomes) else ""
        problems.append(
            f"{lead}{len(failed)} of {counted(len(outcomes), 'namespace')} not loaded (previous data kept): "
            + ", ".join(f"{o.namespace_company_id} ({o.error})" for o in failed)
        )
    if failing:
        from .analytics.checks import (
            format_failures,  # start-up (the models 0.19 s of imports): loaded when a check failed
        )

        problems.append(format_failures(failing))
    return "; ".join(problems)


# -- what the flows need of the library, besides the steps ----------------------------
def source_settings(**overrides: Any) -> SourceSettings:
    """The source's settings: `overrides` that are not None, then dlt config (see
    :func:`diligence.sync.source_settings`)."""
    from .sync import source_settings as resolve  # start-up (dlt 0.9 s of imports): see sync_step

    return resolve(**overrides)


def warm_up() -> None:
    """Start the process the models step builds in (:func:`diligence.analytics.warm_up`):
    dbt's imports and parse run there while a sync waits on the service."""
    from .analytics import (
        warm_up as start,  # start-up (dbt 2.1 s of imports): dbt loads for a model build only
    )

    start()


def known_export_formats() -> list[str]:
    """Every export format (:class:`~diligence.report.export.Format`), as its name."""
    from .report.export import Format  # start-up: see export_step

    return [fmt.value for fmt in Format]


def check_export_formats(formats: Sequence[str]) -> None:
    """Reject an unknown export format (ValueError naming it) before anything runs."""
    known = known_export_formats()
    unknown = sorted(set(formats) - set(known))
    if unknown:
        raise ValueError(f"unknown export format(s) {', '.join(unknown)}; expected {' or '.join(known)}")


def failed_outcome(namespace: str, error: str) -> NamespaceOutcome:
    """The outcome of a namespace whose sync failed before it could record one (the sync
    could not run at all, or its run ended first): nothing read, nothing loaded."""
    from .sync import NamespaceOutcome  # start-up: see sync_step

    return NamespaceOutcome(namespace_company_id=namespace, status="failed", requests=0, rows=0,
                            issues=0, duration_seconds=0.0, error=error)


def sync_step(
    warehouse: Warehouse,
    settings: SourceSettings,
    *,
    progress: Any | None = None,
    wait_seconds: float = 0.0,
    on_namespace: Callable[[NamespaceOutcome], None] | None = None,
    resources: Sequence[str] | None = None,
    budget: Callable[[SourceSettings], Any] | None = None,
    restart: bool = False,
) -> SyncResult:
    """Sync the namespaces into `raw` (see :func:`diligence.sync.run_sync`).

    A sync that cannot run at all (credentials, user-info, service) is recorded as a
    failed attempt for ``diligence status``, then raised.
    """
    from .sync import (
        run_sync,  # start-up (dlt 0.9 s of imports): dlt loads for a sync, not for `diligence export`
    )

    try:
        return run_sync(
            warehouse,
            settings,
            progress=progress,
            wait_seconds=wait_seconds,
            on_namespace=on_namespace,
            resources=tuple(resources) if resources else None,
            budget=budget,
            restart=restart,
        )
    except SyncError as exc:
        if warehouse.path is not None:  # a lake keeps no file of failed attempts
            secrets = tuple(str(v) for v in (settings.password, settings.access_token) if v)
            record_failed_attempt(warehouse.path, str(exc), secrets)
        raise


def analytics_step(
    warehouse: Warehouse,
    *,
    expiring_within_days: int | None = None,
    as_of: datetime | None = None,
    wait_seconds: float = 0.0,
    full_refresh: bool = False,
    time_zone: str | None = None,
) -> AnalyticsResult:
    """Build the models, run the checks, publish the analysts' copy if they pass.
    The history marts are extended by the syncs since their last build; `full_refresh`
    builds them anew from all of `raw` (the same tables). A file whose blocks the build
    left a quarter free is then written anew (:mod:`diligence.warehouse.compact`).

    `expiring_within_days` None means as configured: this is where the window is
    resolved (:func:`diligence.config.expiring_within_days`), once, for the CLI, the demo
    and the flows alike; they pass None unless the user gave a number. So is
    `time_zone`, whose calendar days expiry counts (:func:`diligence.config.analytics_timezone`).

    Refused (:class:`~diligence.errors.WarehouseNotReadyError`, one line naming each
    namespace) while a namespace's last sync attempt ended before it was committed: the
    models would publish it as if that attempt had not happened. Rerunning the sync
    finishes it (from what it had fetched).
    """
    from .analytics import (
        rebuild_analytics,  # start-up (dbt 2.1 s of imports): dbt loads for a model build only
    )

    with warehouse.writing(wait_seconds=wait_seconds):
        _refuse_unfinished(warehouse, "building or publishing")
        result = rebuild_analytics(
            warehouse,
            expiring_within_days=configured_expiry(expiring_within_days),
            time_zone=analytics_timezone(time_zone),
            as_of=as_of,
            wait_seconds=wait_seconds,
            full_refresh=full_refresh,
        )
        warehouse.compact()  # the build rewrote the marts: their old blocks are free now
        return result


def register_step(
    warehouse: Warehouse,
    as_of: datetime,
    out: Path,
    *,
    expiring_within_days: int | None = None,
    time_zone: str | None = None,
    wait_seconds: float = 0.0,
) -> RegisterResult:
    """Build every model as the warehouse knew it at `as_of` into the file `out`, never
    touching `analytics` or the analysts' copy (:mod:`diligence.analytics.register`).
    The window and time zone are resolved as for :func:`analytics_step`; refused like
    it while a namespace's last sync is unfinished."""
    from .analytics.register import build_register  # start-up: see analytics_step

    with warehouse.writing(wait_seconds=wait_seconds):
        _refuse_unfinished(warehouse, "building the register")
        return build_register(warehouse, as_of, out, expiring_within_days=configured_expiry(expiring_within_days),
                              time_zone=analytics_timezone(time_zone), wait_seconds=wait_seconds)


@contextlib.contextmanager
def register_of(
    warehouse: Warehouse,
    as_of: datetime,
    *,
    expiring_within_days: int | None = None,
    time_zone: str | None = None,
    wait_seconds: float = 0.0,
) -> Iterator[tuple[Warehouse, RegisterResult]]:
    """The register as of `as_of` (:func:`register_step`) in a private file beside the
    warehouse, for the block: the export and the report read it as they read a
    warehouse's `analytics`; the result carries the evidence head (None: none kept).
    Raises :class:`~diligence.errors.DbtError` when a check failed (nothing to read);
    the file is gone when the block ends."""
    if warehouse.path is None:
        raise RegisterError("--as-of needs a DuckDB file warehouse, not a lake")
    scratch = Path(tempfile.mkdtemp(prefix=f".{warehouse.path.name}.register-", dir=warehouse.path.parent))
    try:
        result = register_step(warehouse, as_of, scratch / "register.duckdb",
                               expiring_within_days=expiring_within_days, time_zone=time_zone,
                               wait_seconds=wait_seconds)
        if result.out is None:
            raise DbtError(f"the register as of {result.as_of.isoformat()} failed its checks: "
                             + failure_message((), result.failed_checks))
        head = (evidence_of(warehouse) or {}).get("head")
        yield Warehouse(result.out), replace(result, evidence_head=head)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _refuse_unfinished(warehouse: Warehouse, doing: str) -> None:
    """Raise :class:`WarehouseNotReadyError`, naming each namespace, while a namespace's
    last sync attempt ended before it was committed (a rerun of the sync finishes it)."""
    from .resume import unfinished_namespaces

    unfinished = unfinished_namespaces(warehouse)
    if unfinished:
        names = ", ".join(f"{u.namespace} (sync {u.sync_id})" for u in unfinished)
        raise WarehouseNotReadyError(
            f"not {doing}: the last sync of {names} ended before it was "
            "committed; rerun `diligence sync` to finish it (nothing half-done is published)"
        )


def export_step(
    warehouse: Warehouse,
    out_dir: Path | None,
    formats: Sequence[Format | str],
    *,
    csv_raw: bool = False,
    reports_root: Path = DEFAULT_REPORTS_DIR,
    register: RegisterResult | None = None,
) -> ExportResult:
    """Write every report in every format (each once) into one folder, put in place
    whole once every file is written (:mod:`diligence.report.folders`): exactly `out_dir`
    (an earlier export there is replaced), or when None, a new run folder under
    `reports_root`, named after the last sync, which ``latest`` then names; the run
    folders beyond ``[exports] keep`` are removed. CSV text cells keep the formula guard
    unless `csv_raw` (or `export.csv_raw` in config) says not to. The folder and the
    files' paths are where they are once in place. An export of `register` (the register
    as of a date, read through :func:`register_of`) also carries its ``register.json``:
    the moment, the sync, the evidence head and each file's SHA-256."""
    from .report.export import (  # start-up (DuckDB 0.13 s of imports): DuckDB loads when a step runs
        ExportResult,
        export_reports,
        last_sync_id,
        require_reports,
        write_register_manifest,
    )
    from .report.folders import ExportFolder

    keep, raw = exports_keep(), configured_csv_raw(csv_raw)
    label = warehouse.display()
    exported: list[ExportedFile] = []
    with warehouse.session(read_only=not warehouse.locked, memory_limit=None) as con:
        require_reports(con, f"diligence models --warehouse {label}")
        folder = ExportFolder(out_dir, root=reports_root, sync_id=last_sync_id(con), keep=keep)
        with folder as building:
            for fmt in dict.fromkeys(formats):
                exported += export_reports(con, building, fmt, label=label, csv_raw=raw)
            if register is not None:
                write_register_manifest(building, exported, {
                    "as_of": register.as_of.isoformat(), "synced_at": register.synced_at.isoformat(),
                    "sync_id": last_sync_id(con), "evidence_head": register.evidence_head})
    return ExportResult(folder.path, [replace(file, path=folder.path / file.path.name) for file in exported])


def report_step(warehouse: Warehouse, out_file: Path) -> ReportResult:
    """Write the HTML report of the warehouse to `out_file`; raises
    :class:`~diligence.errors.WarehouseNotReadyError` when there is no warehouse or no
    models yet, :class:`~diligence.report.page.ReportError` when it cannot be opened."""
    # start-up (altair 0.3 s of imports): DuckDB, altair and jinja2 load when a report is written, not with the CLI
    import duckdb

    from .errors import ReportError
    from .report.page import write_report

    if warehouse.path is not None and not warehouse.path.exists():
        raise WarehouseNotReadyError(f"no warehouse at {warehouse.path}; run `diligence sync` first")
    with contextlib.ExitStack() as stack:
        try:
            con = stack.enter_context(warehouse.session(read_only=not warehouse.locked, memory_limit=None))
        except duckdb.Error as exc:
            raise ReportError(f"cannot open {warehouse.display()}: {str(exc).splitlines()[0]}") from None
        return write_report(warehouse.display(), out_file, con=con)


#: Taking a free writer lock (and checking that no session holds the file) takes
#: well under this; more means the step waited for another writer.
_WAIT_NOTICED = 0.5


def _waited(asked: float, wait_seconds: float) -> float:
    """Seconds spent getting hold of the warehouse, when that was a wait (else 0)."""
    waited = time.monotonic() - asked
    return round(waited, 1) if wait_seconds > 0 and waited >= _WAIT_NOTICED else 0.0


def run_pipeline(
    warehouse: Path | Warehouse = DEFAULT_WAREHOUSE,
    *,
    settings: SourceSettings | None = None,
    progress: Any | None = None,
    on_namespace: Callable[[NamespaceOutcome], None] | None = None,
    on_synced: Callable[[SyncResult], None] | None = None,
    download_to: Path | None = None,
    models: bool = True,
    expiring_within_days: int | None = None,
    as_of: datetime | None = None,
    export_to: Path | None = None,
    export_formats: Sequence[Format | str] = (),
    reports_root: Path = DEFAULT_REPORTS_DIR,
    report_to: Path | None = None,
    wait_seconds: float = 0.0,
    resources: Sequence[str] | None = None,
    restart: bool = False,
    full_refresh: bool = False,
) -> PipelineResult:
    """Run the steps in order, holding the warehouse once for all of them.

    The sync (and the downloads) read the service with `settings`, the source's settings
    resolved by the caller (:func:`diligence.sync.source_settings`); without them only
    the later steps run.
    `on_synced` is called after the sync step (e.g. to print its outcome before the
    models are built). Namespaces that failed do not stop the later steps: the models
    are rebuilt from what the warehouse holds (their previous data). Downloads only run
    when `download_to` is given, exports when `export_formats` are: into `export_to`, or
    when None a new run folder under `reports_root` (:func:`export_step`). When the sync loaded
    no namespace at all, nothing after it runs (see :attr:`PipelineResult.nothing_loaded`).
    `resources` limits the sync's load to those data resources. `restart` discards
    what an interrupted sync left to resume (see :mod:`diligence.resume`). `full_refresh`
    builds the history marts anew (:func:`analytics_step`).
    """
    owner = warehouse if isinstance(warehouse, Warehouse) else Warehouse(warehouse)
    if download_to is not None and owner.path is None:  # before anything is fetched
        raise ValueError("--download-documents needs a DuckDB file warehouse, not a lake")
    if download_to is not None and settings is None:
        raise ValueError("downloading documents needs the source's settings")
    result = PipelineResult()
    asked = time.monotonic()
    with owner.writing(wait_seconds=wait_seconds):
        result.waited_seconds = _waited(asked, wait_seconds)
        if settings is not None:
            if models:
                warm_up()  # the models' process: dbt's imports and parse while the sync waits on the service
            result.sync = sync_step(
                owner,
                settings,
                progress=progress,
                on_namespace=on_namespace,
                wait_seconds=wait_seconds,
                resources=resources,
                restart=restart,
            )
            if on_synced is not None:
                on_synced(result.sync)
            if result.nothing_loaded:
                return result
        if download_to is not None:
            from .documents import (
                download_documents,  # start-up (dlt 0.9 s of imports): dlt and the client load on demand
            )

            result.downloads = download_documents(owner, download_to, settings)
        if models:
            result.analytics = analytics_step(
                owner, expiring_within_days=expiring_within_days, as_of=as_of, wait_seconds=wait_seconds,
                full_refresh=full_refresh,
            )
        if export_formats:
            export = export_step(owner, export_to, export_formats, reports_root=reports_root)
            result.exported, result.export_folder = export.files, export.folder
        if report_to is not None:
            result.report = report_step(owner, report_to)
    return result
