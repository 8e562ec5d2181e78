"""App settings (not the source's): one place, one default each.

The source's own settings (URL, credentials, concurrency, ...) are the dlt
``@configspec`` in :mod:`pipelines.company_connections.config`. The app's come from
dlt config too, and an explicit value (a CLI option, a flow parameter) always wins::

    [sources.company_connections]
    expiring_within_days = 30      # SOURCES__COMPANY_CONNECTIONS__EXPIRING_WITHIN_DAYS
    [schedule]
    cron = "0 6 * * *"             # SCHEDULE__CRON
    timezone = "UTC"               # SCHEDULE__TIMEZONE
    [warehouse]
    file_mode = "owner"            # DILIGENCE_FILE_MODE; "group": 0640/0750 (see filemodes)
    [notifications]
    block = "custom-webhook/diligence-alerts"  # NOTIFICATIONS__BLOCK: <type slug>/<name>

Nothing is imported from dlt until a value is looked up.
"""

from __future__ import annotations

from pathlib import Path

from .warehouse import DEFAULT_WAREHOUSE

__all__ = [
    "DEFAULT_WAREHOUSE",
    "DEFAULT_REPORTS_DIR",
    "DEFAULT_EXPIRING_WITHIN_DAYS",
    "DEFAULT_CRON",
    "DEFAULT_TIMEZONE",
    "EXPORT_FORMATS",
    "FILE_MODES",
    "expiring_within_days",
    "file_mode",
    "notification_block",
    "schedule_settings",
]

DEFAULT_REPORTS_DIR = Path("reports")
DEFAULT_EXPIRING_WITHIN_DAYS = 30
DEFAULT_CRON = "0 6 * * *"
DEFAULT_TIMEZONE = "UTC"
EXPORT_FORMATS: tuple[str, ...] = ("csv", "parquet")
#: Who may read the confidential files: the owner only (default), or the group too.
FILE_MODES: tuple[str, ...] = ("owner", "group")
FILE_MODE_ENV = "DILIGENCE_FILE_MODE"


def _configured(key: str, hint: type) -> object | None:
    import dlt

    return dlt.config.get(key, hint)


def expiring_within_days(value: int | None = None) -> int:
    """Days ahead that count as 'expiring': `value`, else config, else 30."""
    if value is not None:
        return int(value)
    configured = _configured("sources.company_connections.expiring_within_days", int)
    return DEFAULT_EXPIRING_WITHIN_DAYS if configured is None else int(configured)  # type: ignore[call-overload]


def schedule_settings(cron: str | None = None, timezone: str | None = None) -> tuple[str, str]:
    """(cron, timezone): the arguments, else config `schedule.*`, else ``0 6 * * *`` UTC."""
    cron = cron or _configured("schedule.cron", str) or DEFAULT_CRON  # type: ignore[assignment]
    timezone = timezone or _configured("schedule.timezone", str) or DEFAULT_TIMEZONE  # type: ignore[assignment]
    return str(cron), str(timezone)


def file_mode(value: str | None = None) -> str:
    """``owner`` or ``group``: `value`, else env ``DILIGENCE_FILE_MODE``, else config
    ``warehouse.file_mode``, else ``owner``. Raises ValueError for anything else."""
    import os

    chosen = value or os.environ.get(FILE_MODE_ENV) or _configured("warehouse.file_mode", str)
    chosen = str(chosen or "owner").strip().lower()
    if chosen not in FILE_MODES:
        raise ValueError(
            f"file_mode must be one of {', '.join(FILE_MODES)}, not {chosen!r} "
            f"(config [warehouse] file_mode or env {FILE_MODE_ENV})"
        )
    return chosen


def notification_block(value: str | None = None) -> str | None:
    """Name of the Prefect notification block for run alerts: `value`, else config
    ``notifications.block``, else None (no alerts)."""
    name = value or _configured("notifications.block", str)
    return str(name) if name else None
