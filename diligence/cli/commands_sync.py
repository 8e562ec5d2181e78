"""The commands that read the service or build the warehouse: `sync`, `check`, `models`.

Each parses its options, calls :mod:`diligence.steps` (or :mod:`diligence.cli.check`)
and prints through :mod:`diligence.cli.output`. The expiry window is passed on as given
(None: as configured, resolved by the build in :func:`diligence.steps.analytics_step`).
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any

import typer

from ..config import DEFAULT_EXPIRING_WITHIN_DAYS
from ..errors import CommandError, SelectError
from .base import (
    _AS_OF_SLACK,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    BaseUrlOption,
    DataPathOption,
    EvidenceOption,
    NamespacesOption,
    WarehouseOption,
    _parse_as_of,
    _password_from_stdin,
    _quiet,
    _require_data,
    _state,
    _warehouse,
    app,
    command_for,
    err,
    handle_errors,
    out,
)
from .output import final_line, print_analytics, print_downloads, print_sync, print_waited
from .progress import SyncProgress
from .select import parse_select
from .summary import run_summary, write_summary

__all__ = ["check", "models", "sync"]


@app.command()
@handle_errors
def sync(
    base_url: BaseUrlOption = None,
    warehouse: WarehouseOption = None,
    data_path: DataPathOption = None,
    evidence: EvidenceOption = None,
    namespace: NamespacesOption = None,
    no_models: Annotated[bool, typer.Option("--no-models", help="Skip building the models.")] = False,
    download_documents: Annotated[
        Path | None,
        typer.Option(
            "--download-documents",
            help="Also download new or changed document files into this folder.",
        ),
    ] = None,
    max_concurrency: Annotated[
        int | None, typer.Option(help="Requests in flight at once (default: config, 16).", min=1)
    ] = None,
    wait: Annotated[
        float, typer.Option(help="Seconds to wait for another sync on the same warehouse.", min=0)
    ] = 0.0,
    select: Annotated[
        list[str] | None,
        typer.Option(
            "--select",
            help="Load only these resources, e.g. documents,questionnaires; the others are left "
            "as they are (nothing of them retired). After a first full sync.",
        ),
    ] = None,
    json_summary: Annotated[
        Path | None,
        typer.Option("--json-summary", help="Write a JSON run report (requests, retries, 429s, rows, "
                     "issues, durations per namespace) to this file."),
    ] = None,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from standard input.")
    ] = False,
    restart: Annotated[
        bool, typer.Option("--restart", help="Start from zero: discard what an interrupted sync "
                           "left to resume (its unsealed manifest), and read every namespace again.")
    ] = False,
) -> None:
    """Sync every namespace into the raw dataset, then build the models.

    Exits 0 when every namespace was read completely (denied or missing items are
    recorded in sync_issues), non-zero on bad credentials, an unreachable service,
    or a namespace that could not be read completely (it is named, and its previous
    data is kept). A sync that loaded nothing builds and publishes nothing.
    """
    from ..steps import run_pipeline, source_settings

    owner = _warehouse(warehouse, data_path, evidence)
    try:
        resources = parse_select(select)
    except SelectError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
    if resources is not None and not owner.synced_namespaces():
        raise CommandError(
            f"--select needs a warehouse filled by a full sync first; run `diligence sync "
            f"--warehouse {owner.display()}` without --select once", EXIT_USAGE
        )
    settings = source_settings(
        base_url=base_url, namespaces=namespace or None, max_concurrency=max_concurrency,
        password=_password_from_stdin(password_stdin),
    )
    interval = 1.0 if _state["verbosity"] > 0 else 5.0
    with SyncProgress(console=err, interval=interval, enabled=not _quiet()) as progress:
        try:
            result = run_pipeline(
                owner,
                settings=settings,
                progress=progress,
                on_synced=lambda synced: (progress.stop(), print_sync(synced)),
                download_to=download_documents,
                models=not no_models,
                wait_seconds=wait,
                resources=resources,
                restart=restart,
            )
        except KeyboardInterrupt:
            progress.stop()
            err.print(progress.interrupted_line(), highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
    assert result.sync is not None
    print_waited(result.waited_seconds, owner.display())
    if json_summary is not None:
        write_summary(run_summary(result), json_summary)
    if result.nothing_loaded:
        _nothing_loaded(result)
        return
    if result.downloads is not None and not _quiet():
        print_downloads(result.downloads, download_documents)
    if result.analytics is not None and not _quiet():
        print_analytics(result.analytics, owner)
    if no_models and not _quiet():
        out.print(f"models not built (--no-models): `{command_for(owner, 'models')}` builds them", highlight=False)
    if result.downloads is not None and result.downloads.failed:
        raise CommandError(f"{result.downloads.failed} document downloads failed (see the log above)")
    if result.failure:
        raise CommandError(result.failure)
    if _quiet():
        out.print(final_line(result), highlight=False)


def _nothing_loaded(result: Any) -> None:
    """One line for a sync that loaded no namespace: nothing was built or published (an
    error naming each namespace, in the flows' words, when some failed)."""
    if result.failure:
        raise CommandError(result.failure)
    out.print("nothing to sync: no namespace; nothing built or published", highlight=False)


@app.command()
@handle_errors
def check(
    base_url: BaseUrlOption = None,
    namespace: NamespacesOption = None,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from standard input.")
    ] = False,
) -> None:
    """Check settings, credentials, base URL, namespaces and reading rights; load nothing.

    Logs in, reads user-info and each namespace's connections with their reading
    rights; never opens the warehouse. Exits non-zero with one line naming what to fix.
    """
    from ..sync import (
        source_settings,  # start-up (dlt 0.9 s of imports): the client (httpx, dlt) loads here
    )
    from .check import report_lines, run_check

    settings = source_settings(base_url=base_url, namespaces=namespace or None,
                               password=_password_from_stdin(password_stdin))
    report = run_check(settings)
    lines = report_lines(report)
    for line in lines if not _quiet() else lines[-1:]:
        out.print(line, highlight=False, markup=False)


@app.command()
@handle_errors
def models(
    warehouse: WarehouseOption = None,
    data_path: DataPathOption = None,
    expiring_within_days: Annotated[
        int | None,
        typer.Option(help="Days ahead that count as 'expiring' "
                     f"(default: config, {DEFAULT_EXPIRING_WITHIN_DAYS}).", min=0),
    ] = None,
    as_of: Annotated[
        str | None,
        typer.Option(help="The warehouse as it stood at this UTC timestamp, expiry evaluated then "
                     "(e.g. 2026-06-30T23:59:59); a past one needs --out."),
    ] = None,
    out_file: Annotated[
        Path | None,
        typer.Option("--out", help="Build the register as of --as-of (default: now) into this DuckDB file "
                     "instead of analytics; the warehouse's analytics and analysts' copy stay as they are."),
    ] = None,
    wait: Annotated[
        float, typer.Option(help="Seconds to wait for a sync or session holding the warehouse.", min=0)
    ] = 0.0,
    publish: Annotated[
        bool,
        typer.Option("--publish", help="With --as-of in the past and no --out: publish today's data with "
                     "expiry as of then to the analysts' copy anyway."),
    ] = False,
    full_refresh: Annotated[
        bool,
        typer.Option("--full-refresh", help="Build the history tables anew from all of raw instead of adding "
                     "the syncs since their last build (the same tables; slower)."),
    ] = False,
) -> None:
    """(Re)build the analytics schema from raw, in one transaction, then run the checks
    and publish the analysts' read-only copy (<warehouse>-analytics.duckdb; a lake has none).

    With --as-of and --out: the register as of that date, every table as the warehouse
    knew it then (the last sync at or before it), in a file of its own. With --as-of in
    the past and no --out the build would replace the analysts' copy with today's data
    and expiry as of then: on a file warehouse it is refused unless --publish says so.
    """
    owner = _warehouse(warehouse, data_path)
    _require_data(owner, writing=True)
    when = _parse_as_of(as_of)
    if out_file is not None:
        _build_register(owner, when or datetime.now(timezone.utc), out_file, expiring_within_days, wait)
        return
    past = when is not None and when < datetime.now(timezone.utc) - _AS_OF_SLACK
    if past and not publish and not owner.is_lake:  # a lake has no analysts' copy to replace
        raise CommandError(
            f"--as-of {as_of} is in the past: pass --out FILE for the register as of then (the "
            "analysts' copy stays as it is), or --publish to publish today's data with expiry as of then",
            EXIT_USAGE,
        )
    _build_models(owner, expiring_within_days, when, wait, full_refresh)


def _build_register(warehouse: Any, as_of: datetime, out_file: Path, expiring_within_days: int | None,
                    wait: float) -> None:
    """Build the register as of `as_of` into `out_file`; print it; raise when a check failed."""
    from ..steps import failure_message, register_step  # start-up: see _build_models

    result = register_step(warehouse, as_of, out_file, expiring_within_days=expiring_within_days,
                           wait_seconds=wait)
    models = result.models
    out.print(f"register as of {result.as_of.isoformat()} (the sync of {result.synced_at.isoformat()}) "
              f"built in {models.seconds:.2f}s: "
              + ", ".join(f"{table} {rows}" for table, rows in models.row_counts.items()), highlight=False)
    if result.failed_checks:
        raise CommandError(f"register not written: {failure_message((), result.failed_checks)}")
    out.print(f"all data checks passed; register: {result.out}", highlight=False)


def _build_models(
    warehouse: Any, expiring_within_days: int | None, as_of: datetime | None, wait: float = 0.0,
    full_refresh: bool = False,
) -> None:
    """Build, check and publish; print the outcome; raise when a check failed."""
    from ..steps import (
        run_pipeline,  # start-up (dbt 2.1 s of imports): dlt and dbt load when a command runs
    )

    result = run_pipeline(
        warehouse, expiring_within_days=expiring_within_days, as_of=as_of, wait_seconds=wait,
        full_refresh=full_refresh,
    )
    assert result.analytics is not None
    print_waited(result.waited_seconds, warehouse.display())
    if _quiet():
        if not result.analytics.failed_checks:
            out.print(f"models built; analysts' copy: {result.analytics.published}", highlight=False)
    else:
        print_analytics(result.analytics, warehouse)
    if result.failure:
        raise CommandError(result.failure)
