"""Serve `company-connections-sync` on its cron schedule, without a work pool.

``python -m flows.serve`` (or ``diligence schedule``) registers the deployment
``company-connections-sync/company-connections-scheduled`` with the Prefect API in
``PREFECT_API_URL`` and runs its flow runs in subprocesses of this process until it
is stopped by Ctrl+C or SIGTERM, with exit code 0 (its schedule is then paused until it
is served again). SIGTERM, as systemd or Docker send it, also cancels a run in flight:
its process is ended and the run marked Cancelled (:class:`ScheduleRunner`).

The schedule comes from dlt config through :mod:`diligence.config`, like every other
setting::

    [schedule]                  # .dlt/config.toml, or SCHEDULE__CRON / SCHEDULE__TIMEZONE
    cron = "0 6 * * *"
    timezone = "UTC"
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import MutableMapping
from typing import Any

from prefect.runner import Runner
from prefect.schedules import Cron

from diligence.config import DEFAULT_CRON, DEFAULT_TIMEZONE, schedule_settings

from .company_connections_sync import company_connections_sync

__all__ = [
    "DEPLOYMENT_NAME",
    "DEFAULT_CRON",
    "DEFAULT_TIMEZONE",
    "ScheduleRunner",
    "schedule_settings",
    "serve_schedule",
]

DEPLOYMENT_NAME = "company-connections-scheduled"
#: Loggers whose records flow runs send to Prefect, next to the run logger's.
EXTRA_LOGGERS = ("dlt", "diligence")

log = logging.getLogger("prefect.runner")


class ScheduleRunner(Runner):
    """Prefect's :class:`~prefect.runner.Runner`, which SIGTERM stops as cleanly as Ctrl+C.

    ``Runner.start`` makes :meth:`handle_sigterm` the process's SIGTERM handler. Prefect's
    own handler calls ``Runner.stop()`` from inside the runner's event loop, where that
    only creates the coroutine ``Runner.astop`` without running it ("coroutine
    'Runner.astop' was never awaited"), then exits in the middle of the loop: a traceback,
    and a run in flight keeps the process alive until it ends. This one runs
    ``Runner.astop`` on the runner's loop, the stop Prefect intends: the runs in flight are
    cancelled (their processes sent SIGTERM, the runs marked Cancelled), polling stops,
    ``start`` returns, and the schedule is paused on the way out.
    """

    async def __aenter__(self) -> ScheduleRunner:
        """Start as Prefect's runner does, then say so: from here SIGTERM runs ``astop``."""
        await super().__aenter__()
        log.info("runner %r started: polling for scheduled runs", self.name)
        return self

    def handle_sigterm(self, *args: Any, **kwargs: Any) -> None:
        """Stop on SIGTERM: as Ctrl+C (KeyboardInterrupt) before the runner has started,
        with ``Runner.astop`` once it has; a further SIGTERM while stopping is ignored."""
        if self.stopping:
            return
        if not self.started:
            raise KeyboardInterrupt
        log.info("SIGTERM received: cancelling the runs in flight and stopping")
        self.execute_in_background(self.astop)


def route_library_logs(env: MutableMapping[str, str] | None = None) -> None:
    """Make flow runs started from this process send dlt's and diligence's logs to Prefect.

    Served flow runs are subprocesses that inherit this process's environment, in which
    ``PREFECT_LOGGING_EXTRA_LOGGERS`` is extended with :data:`EXTRA_LOGGERS`.
    """
    env = os.environ if env is None else env
    current = [name.strip() for name in env.get("PREFECT_LOGGING_EXTRA_LOGGERS", "").split(",")]
    names = [name for name in current if name]
    names += [name for name in EXTRA_LOGGERS if name not in names]
    env["PREFECT_LOGGING_EXTRA_LOGGERS"] = ",".join(names)


def deployment_parameters(
    *,
    namespaces: list[str] | None = None,
    expiring_within_days: int | None = None,
    export_formats: list[str] | None = None,
    reports_dir: str | None = None,
    warehouse: str | None = None,
    base_url: str | None = None,
) -> dict[str, Any]:
    """Parameter defaults of the served deployment: only those given. The flow resolves
    the rest when each run starts, from the settings of the process that runs it (the
    warehouse, the expiry window), as the CLI does."""
    given: dict[str, Any] = {
        "namespaces": namespaces or None,
        "expiring_within_days": expiring_within_days,
        "export_formats": export_formats or None,
        "reports_dir": reports_dir,
        "warehouse": warehouse,
        "base_url": base_url,
    }
    return {key: value for key, value in given.items() if value is not None}


def serve_schedule(
    cron: str | None = None,
    timezone: str | None = None,
    *,
    name: str = DEPLOYMENT_NAME,
    namespaces: list[str] | None = None,
    expiring_within_days: int | None = None,
    export_formats: list[str] | None = None,
    reports_dir: str | None = None,
    warehouse: str | None = None,
    base_url: str | None = None,
) -> None:
    """Serve the flow on `cron` in `timezone` until Ctrl+C or SIGTERM; one run at a time.

    `cron`/`timezone` default to dlt config ``schedule.cron``/``schedule.timezone``,
    then to ``0 6 * * *`` UTC. The other arguments become the deployment's parameter
    defaults (unset ones keep the flow's defaults). Credentials stay in dlt config or
    the Prefect Secret block, never in parameters.
    """
    cron, timezone = schedule_settings(cron, timezone)
    route_library_logs()
    runner = ScheduleRunner(name=name, limit=1)
    signal.signal(signal.SIGTERM, runner.handle_sigterm)  # already while registering
    try:
        runner.add_flow(
            company_connections_sync,
            name=name,
            schedules=[Cron(cron, timezone=timezone)],
            parameters=deployment_parameters(
                namespaces=namespaces,
                expiring_within_days=expiring_within_days,
                export_formats=export_formats,
                reports_dir=reports_dir,
                warehouse=warehouse,
                base_url=base_url,
            ),
            description=f"company-connections sync, served locally on {cron!r} ({timezone})",
            tags=["diligence"],
        )
        deployment = f"{company_connections_sync.name}/{name}"
        print(f"serving {deployment!r}; run it now with: prefect deployment run {deployment!r}",
              flush=True)
        asyncio.run(runner.start())
    except KeyboardInterrupt:  # Ctrl+C, or SIGTERM before the runner started: stopped
        pass


if __name__ == "__main__":
    serve_schedule()
