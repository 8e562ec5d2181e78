"""Prefect flow `company-connections-register`: the register as of a date, for a reference
date such as a quarter's end (DORA's register of information, a SOC 2 period).

One task calls the steps of :mod:`diligence.steps` the CLI's `export --as-of` and `report
--as-of` call: :func:`~diligence.steps.register_of` builds every model as the warehouse
knew it at `as_of` aside from `analytics` (the analysts' copy stays as it is), then
:func:`~diligence.steps.export_step` and :func:`~diligence.steps.report_step` write its
reports and HTML report into ``<reports_dir>/register-<as_of>/``. Without `as_of` the
run takes the end of the last calendar quarter before it (UTC), so a deployment that
runs early in each quarter (`prefect.yaml`: `company-connections-quarter-end-register`)
files the register of the quarter that just ended. It syncs nothing: it reads what the
daily syncs kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from diligence.config import DEFAULT_LOCK_WAIT_SECONDS, DEFAULT_REPORTS_DIR
from diligence.steps import (
    check_export_formats,
    export_step,
    known_export_formats,
    open_warehouse,
    register_of,
    report_step,
)

from .retry import retry_if_transient

REGISTER_FLOW_NAME = "company-connections-register"
REGISTER_ARTIFACT_KEY = "register-as-of"
#: The quarter-end deployment's schedule (prefect.yaml): 07:00 UTC on each quarter's first day.
QUARTER_END_CRON = "0 7 1 1,4,7,10 *"


@dataclass(frozen=True)
class RegisterRun:
    """What a register run wrote: the moment, the sync it stands on, its folder."""

    as_of: datetime
    synced_at: datetime
    folder: Path
    files: list[Path]


def last_quarter_end(now: datetime) -> datetime:
    """The last instant (UTC) of the calendar quarter before the one `now` falls in."""
    now = now.astimezone(UTC)
    quarter_start = datetime(now.year, 3 * ((now.month - 1) // 3) + 1, 1, tzinfo=UTC)
    return quarter_start - timedelta(microseconds=1)


@task(
    name="write-register",
    retries=2,
    retry_delay_seconds=30,
    retry_condition_fn=retry_if_transient,
    cache_policy=NO_CACHE,
)
def write_register(warehouse: str | None, as_of: datetime, folder: Path, export_formats: list[str],
                   expiring_within_days: int | None) -> RegisterRun:
    """Build the register as of `as_of` aside, export its reports and write its HTML
    report into `folder` (replaced whole); publish an artifact naming the sync it stands on."""
    with register_of(open_warehouse(warehouse), as_of, expiring_within_days=expiring_within_days,
                     wait_seconds=DEFAULT_LOCK_WAIT_SECONDS) as (register, built):
        exported = export_step(register, folder, export_formats, register=built)
        report = report_step(register, exported.folder / "report.html")
    written = RegisterRun(built.as_of, built.synced_at, exported.folder,
                          [file.path for file in exported.files] + [report.path])
    get_run_logger().info("register as of %s (the sync of %s): %d files in %s", written.as_of.isoformat(),
                          written.synced_at.isoformat(), len(written.files), written.folder)
    create_markdown_artifact(
        key=REGISTER_ARTIFACT_KEY,
        markdown=f"# Register as of {written.as_of.isoformat()}\n\n"
        f"The warehouse as the sync of {written.synced_at.isoformat()} left it: "
        f"{len(written.files)} files in `{written.folder}`.",
        description="The register as of a date",
    )
    return written


@flow(name=REGISTER_FLOW_NAME)
def company_connections_register(
    as_of: datetime | None = None,
    export_formats: list[str] = known_export_formats(),  # noqa: B008 - Prefect parameter default
    reports_dir: str = str(DEFAULT_REPORTS_DIR),
    warehouse: str | None = None,
    expiring_within_days: int | None = None,
) -> RegisterRun:
    """Write the register as of `as_of`: every report, as the warehouse knew it then, and
    the HTML report, into ``<reports_dir>/register-<as_of, UTC>/``.

    Args:
        as_of: the reference moment (a naive one is UTC); default the end of the last
            calendar quarter before the run.
        export_formats: report formats to write (`csv`, `parquet`; default every format).
        reports_dir: the folder that receives the register's folder.
        warehouse: the DuckDB file; default as for the CLI.
        expiring_within_days: documents expiring within this many days of `as_of` are
            `expiring`; None: as configured.
    """
    check_export_formats(export_formats)
    moment = (as_of if as_of is None or as_of.tzinfo else as_of.replace(tzinfo=UTC)) or last_quarter_end(
        datetime.now(UTC))
    folder = Path(reports_dir) / f"register-{moment.astimezone(UTC):%Y-%m-%dT%H%M%SZ}"
    return write_register(warehouse, moment, folder, export_formats, expiring_within_days)
