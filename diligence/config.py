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
    [warehouse]
    location = "data/warehouse.duckdb"   # or ducklake:postgres:<conninfo>; DILIGENCE_WAREHOUSE
    data_path = "/srv/lake"              # a lake's Parquet files; DILIGENCE_DATA_PATH
    file_mode = "owner"            # DILIGENCE_FILE_MODE; "group": 0640/0750 (see filemodes)
    [notifications]
    block = "custom-webhook/diligence-alerts"  # NOTIFICATIONS__BLOCK: <type slug>/<name>

Nothing is imported from dlt until a value is looked up. Callers outside ``diligence``
(the Prefect flow, its deployment) read settings through these functions, never from
``dlt.config`` themselves, so every setting has one reader and one default.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .warehouse import DEFAULT_WAREHOUSE

if TYPE_CHECKING:
    from .warehouse import Warehouse

__all__ = [
    "DEFAULT_WAREHOUSE",
    "DEFAULT_REPORTS_DIR",
    "DEFAULT_EXPIRING_WITHIN_DAYS",
    "DEFAULT_CRON",
    "DEFAULT_TIMEZONE",
    "EXPORT_FORMATS",
    "FILE_MODES",
    "configured_expiring_within_days",
    "csv_raw",
    "configured_namespaces",
    "expiring_within_days",
    "file_mode",
    "notification_block",
    "schedule_settings",
    "warehouse_settings",
    "open_warehouse",
]

WAREHOUSE_ENV = "DILIGENCE_WAREHOUSE"
DATA_PATH_ENV = "DILIGENCE_DATA_PATH"

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


def csv_raw(value: bool = False) -> bool:
    """Whether CSV exports skip the formula guard: `value` (`--csv-raw`), else
    `export.csv_raw` from config, else False (the guard is on)."""
    return bool(value) or bool(_configured("export.csv_raw", bool))


def configured_namespaces() -> list[str]:
    """`sources.company_connections.namespaces` from config, or an empty list."""
    value = _configured("sources.company_connections.namespaces", list)
    return [str(namespace) for namespace in value or []]  # type: ignore[attr-defined]


def schedule_settings(cron: str | None = None, timezone: str | None = None) -> tuple[str, str]:
    """(cron, timezone): the arguments, else config `schedule.*`, else ``0 6 * * *`` UTC."""
    cron = cron or _configured("schedule.cron", str) or DEFAULT_CRON  # type: ignore[assignment]
    timezone = timezone or _configured("schedule.timezone", str) or DEFAULT_TIMEZONE  # type: ignore[assignment]
    return str(cron), str(timezone)


def file_mode(value: str | None = None) -> str:
    """``owner`` or ``group``: `value`, else env ``DILIGENCE_FILE_MODE``, else config
    ``warehouse.file_mode``, else ``owner``. Raises ValueError for anything else."""
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


def warehouse_settings(
    location: str | Path | None = None, data_path: str | Path | None = None
) -> tuple[str | Path, str | None]:
    """(location, data_path): each the argument, else its env var (``DILIGENCE_WAREHOUSE``,
    ``DILIGENCE_DATA_PATH``), else config ``[warehouse] location`` / ``data_path``, else
    ``data/warehouse.duckdb`` and no data path."""
    # The app's own settings, not the source's: read here, never in resource code.
    location = (
        location
        or os.environ.get(WAREHOUSE_ENV)
        or _configured("warehouse.location", str)  # type: ignore[assignment]
        or DEFAULT_WAREHOUSE
    )
    from .location import is_lake_uri

    if data_path or not is_lake_uri(location):
        # a configured data path belongs to a configured lake, not to a file given here
        return location, (str(data_path) if data_path else None)
    data_path = (
        os.environ.get(DATA_PATH_ENV)
        or _configured("warehouse.data_path", str)  # type: ignore[assignment]
        or None
    )
    return location, (str(data_path) if data_path else None)  # type: ignore[return-value]


def open_warehouse(
    location: str | Path | None = None, data_path: str | Path | None = None
) -> Warehouse:
    """The :class:`~diligence.warehouse.Warehouse` of the settings (see
    :func:`warehouse_settings`). Raises one line (``WarehouseLocationError``) for a
    malformed location, and ``WarehouseFormatError`` for a file a newer DuckDB wrote;
    nothing is opened or written yet."""
    from .migrate import require_readable
    from .warehouse import Warehouse

    owner = Warehouse(*warehouse_settings(location, data_path))
    if owner.path is not None:
        require_readable(owner.path)
    return owner
