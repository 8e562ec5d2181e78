"""App settings (not the source's): one place, one default each.

The source's own settings (URL, credentials, concurrency, ...) are the dlt
``@configspec`` in :mod:`pipelines.company_connections.config`. The app's come from
dlt config too, and an explicit value (a CLI option, a flow parameter) always wins::

    [sources.company_connections]
    expiring_within_days = 30      # SOURCES__COMPANY_CONNECTIONS__EXPIRING_WITHIN_DAYS
    namespaces = ["..."]           # read by the source itself; the flow plans with it too
    [schedule]
    cron = "0 6 * * *"             # SCHEDULE__CRON
    timezone = "UTC"               # SCHEDULE__TIMEZONE

Nothing is imported from dlt until a value is looked up. Callers outside ``diligence``
(the Prefect flow, its deployment) read settings through these functions, never from
``dlt.config`` themselves, so every setting has one reader and one default.
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
    "configured_expiring_within_days",
    "configured_namespaces",
    "expiring_within_days",
    "schedule_settings",
]

DEFAULT_REPORTS_DIR = Path("reports")
DEFAULT_EXPIRING_WITHIN_DAYS = 30
DEFAULT_CRON = "0 6 * * *"
DEFAULT_TIMEZONE = "UTC"
EXPORT_FORMATS: tuple[str, ...] = ("csv", "parquet")


def _configured(key: str, hint: type) -> object | None:
    import dlt

    return dlt.config.get(key, hint)


def configured_expiring_within_days() -> int | None:
    """`sources.company_connections.expiring_within_days` from config, or None if unset."""
    configured = _configured("sources.company_connections.expiring_within_days", int)
    return None if configured is None else int(configured)  # type: ignore[call-overload]


def expiring_within_days(value: int | None = None) -> int:
    """Days ahead that count as 'expiring': `value`, else config, else 30."""
    if value is not None:
        return int(value)
    configured = configured_expiring_within_days()
    return DEFAULT_EXPIRING_WITHIN_DAYS if configured is None else configured


def configured_namespaces() -> list[str]:
    """`sources.company_connections.namespaces` from config, or an empty list."""
    value = _configured("sources.company_connections.namespaces", list)
    return [str(namespace) for namespace in value or []]  # type: ignore[attr-defined]


def schedule_settings(cron: str | None = None, timezone: str | None = None) -> tuple[str, str]:
    """(cron, timezone): the arguments, else config `schedule.*`, else ``0 6 * * *`` UTC."""
    cron = cron or _configured("schedule.cron", str) or DEFAULT_CRON  # type: ignore[assignment]
    timezone = timezone or _configured("schedule.timezone", str) or DEFAULT_TIMEZONE  # type: ignore[assignment]
    return str(cron), str(timezone)
