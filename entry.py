"""The `diligence` command, composed from above: the CLI of ``diligence/`` plus the
commands that need the Prefect flow of ``flows/``.

``diligence`` (the console script) and ``python -m diligence`` run :data:`app`.
``diligence/`` never imports ``flows/``; this module sees both.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import Annotated

import typer

from diligence.cli import app, err, handle_errors

__all__ = ["app", "main"]


@app.command()
@handle_errors
def schedule(
    cron: Annotated[
        str | None, typer.Option(help="Cron of the runs (default: config schedule.cron, 0 6 * * *).")
    ] = None,
    timezone: Annotated[
        str | None, typer.Option(help="IANA time zone of the cron (default: config schedule.timezone, UTC).")
    ] = None,
    warehouse: Annotated[
        Path | None, typer.Option("--warehouse", "-w", help="Warehouse the runs write.")
    ] = None,
    reports_dir: Annotated[
        Path | None, typer.Option(help="Folder for the dated report folders.")
    ] = None,
    namespace: Annotated[
        list[str] | None, typer.Option("--namespace", "-n", help="Company ID to sync; repeat for several.")
    ] = None,
) -> None:
    """Serve the Prefect flow company-connections-sync on its cron schedule (no work pool).

    Registers the deployment company-connections-sync/company-connections-scheduled with
    the Prefect API in PREFECT_API_URL and runs each scheduled run here, one at a time,
    until stopped with Ctrl+C or SIGTERM (exit code 0; SIGTERM cancels a run in flight).
    """
    from diligence.cli import EXIT_USAGE, CommandError
    from diligence.cli.schedule_check import ScheduleError, validate_schedule
    from diligence.config import schedule_settings

    cron, timezone = schedule_settings(cron, timezone)
    try:
        validate_schedule(cron, timezone)
    except ScheduleError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None

    from flows.serve import serve_schedule

    err.print(f"serving company-connections-sync on '{cron}' ({timezone}); Ctrl+C or SIGTERM stops", highlight=False)
    serve_schedule(
        cron,
        timezone,
        warehouse=str(warehouse) if warehouse else None,
        reports_dir=str(reports_dir) if reports_dir else None,
        namespaces=namespace or None,
    )


def main() -> None:
    try:
        app(prog_name="diligence")
    finally:
        # The process ends here: its final garbage collection need not walk every object a
        # sync made (after a whole sync that was 1-2 s of the user's wait, all of it exit).
        gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
