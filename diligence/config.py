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
    kinds = ["document_newly_expired", "namespace_failed"]  # NOTIFICATIONS__KINDS: default all
    [evidence]
    enabled = true                 # EVIDENCE__ENABLED: keep every response and manifest
    path = "/srv/evidence"         # DILIGENCE_EVIDENCE: default beside the warehouse
    retain_days = 400              # EVIDENCE__RETAIN_DAYS: default keep everything

Nothing is imported from dlt until a value is looked up, and nothing of ours at all.
The warehouse's location (env ``DILIGENCE_WAREHOUSE`` / ``DILIGENCE_DATA_PATH``) is read
by :func:`diligence.warehouse.warehouse_settings`, which opens it. Callers outside ``diligence``
(the Prefect flow, its deployment) read settings through these functions, never from
``dlt.config`` themselves, so every setting has one reader and one default.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "DEFAULT_WAREHOUSE",
    "DEMO_WAREHOUSE",
    "DEFAULT_REPORTS_DIR",
    "DEFAULT_EXPIRING_WITHIN_DAYS",
    "DEFAULT_CRON",
    "DEFAULT_TIMEZONE",
    "FILE_MODES",
    "configured_expiring_within_days",
    "configured",
    "csv_raw",
    "configured_namespaces",
    "expiring_within_days",
    "file_mode",
    "notification_block",
    "schedule_settings",
    "EVIDENCE_ENV",
    "evidence_enabled",
    "evidence_path",
    "evidence_retain_days",
]

DEFAULT_WAREHOUSE = Path("data/warehouse.duckdb")
#: Where `diligence demo` syncs the sandbox (kept apart from the user's own warehouse).
DEMO_WAREHOUSE = Path("data/demo.duckdb")
DEFAULT_REPORTS_DIR = Path("reports")
DEFAULT_EXPIRING_WITHIN_DAYS = 30
DEFAULT_CRON = "0 6 * * *"
DEFAULT_TIMEZONE = "UTC"
#: Who may read the confidential files: the owner only (default), or the group too.
FILE_MODES: tuple[str, ...] = ("owner", "group")
FILE_MODE_ENV = "DILIGENCE_FILE_MODE"


def configured(key: str, hint: type) -> object | None:
    """The value of `key` in dlt's config (files and env), or None if unset."""
    import dlt  # start-up (dlt 0.9 s of imports): dlt loads only when a setting is looked up, not on --help

    return dlt.config.get(key, hint)


def configured_secret(key: str, hint: type) -> object | None:
    """The value of `key` in dlt's secrets (``.dlt/secrets.toml``, env), or None if unset."""
    import dlt  # start-up: see configured()

    return dlt.secrets.get(key, hint)


def configured_expiring_within_days() -> int | None:
    """`sources.company_connections.expiring_within_days` from config, or None if unset."""
    value = configured("sources.company_connections.expiring_within_days", int)
    return None if value is None else int(value)  # type: ignore[call-overload]


def expiring_within_days(value: int | None = None) -> int:
    """Days ahead that count as 'expiring': `value`, else config, else 30. Asked once per
    build, by :func:`diligence.steps.analytics_step`; every other caller passes None on."""
    if value is not None:
        return int(value)
    configured = configured_expiring_within_days()
    return DEFAULT_EXPIRING_WITHIN_DAYS if configured is None else configured


def csv_raw(value: bool = False) -> bool:
    """Whether CSV exports skip the formula guard: `value` (`--csv-raw`), else
    `export.csv_raw` from config, else False (the guard is on)."""
    return bool(value) or bool(configured("export.csv_raw", bool))


def configured_namespaces() -> list[str]:
    """`sources.company_connections.namespaces` from config, or an empty list."""
    value = configured("sources.company_connections.namespaces", list)
    return [str(namespace) for namespace in value or []]  # type: ignore[attr-defined]


def schedule_settings(cron: str | None = None, timezone: str | None = None) -> tuple[str, str]:
    """(cron, timezone): the arguments, else config `schedule.*`, else ``0 6 * * *`` UTC."""
    cron = cron or configured("schedule.cron", str) or DEFAULT_CRON  # type: ignore[assignment]
    timezone = timezone or configured("schedule.timezone", str) or DEFAULT_TIMEZONE  # type: ignore[assignment]
    return str(cron), str(timezone)


def file_mode(value: str | None = None) -> str:
    """``owner`` or ``group``: `value`, else env ``DILIGENCE_FILE_MODE``, else config
    ``warehouse.file_mode``, else ``owner``. Raises ValueError for anything else."""
    chosen = value or os.environ.get(FILE_MODE_ENV) or configured("warehouse.file_mode", str)
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
    name = value or configured("notifications.block", str)
    return str(name) if name else None


def notification_kinds(value: list[str] | str | None = None) -> list[str] | None:
    """The kinds a notification carries, as given: `value`, else config
    ``notifications.kinds`` (a list, or one comma-separated string), else None (every
    kind). :func:`diligence.analytics.digest.parse_kinds` checks them."""
    chosen = value
    if chosen is None:
        try:
            chosen = configured("notifications.kinds", list)  # type: ignore[assignment]
        except Exception:  # noqa: BLE001 - not a list: "a,b" (env NOTIFICATIONS__KINDS)
            chosen = configured("notifications.kinds", str)  # type: ignore[assignment]
    if chosen is None or chosen == "":
        return None
    return [str(chosen)] if isinstance(chosen, str) else [str(kind) for kind in chosen]


EVIDENCE_ENV = "DILIGENCE_EVIDENCE"


def evidence_enabled(value: bool | None = None) -> bool:
    """Whether syncs keep their evidence: `value`, else config ``evidence.enabled``, else
    True."""
    if value is not None:
        return bool(value)
    configured_value = configured("evidence.enabled", bool)
    return True if configured_value is None else bool(configured_value)


def evidence_path(value: str | Path | None = None) -> str | None:
    """Where the evidence store is: `value` (``--evidence``), else env
    ``DILIGENCE_EVIDENCE``, else config ``evidence.path``, else None (beside the
    warehouse, see :attr:`diligence.warehouse.Warehouse.evidence_root`)."""
    chosen = value or os.environ.get(EVIDENCE_ENV) or configured("evidence.path", str)
    return str(chosen) if chosen else None


def evidence_retain_days(value: float | None = None) -> float | None:
    """Days a sync's evidence is kept by ``diligence evidence prune``: `value`, else config
    ``evidence.retain_days``, else None (everything is kept)."""
    chosen = value if value is not None else configured("evidence.retain_days", float)
    if chosen is None:
        return None
    if float(chosen) <= 0:  # type: ignore[arg-type]
        raise ValueError(f"evidence.retain_days must be positive, not {chosen}")
    return float(chosen)  # type: ignore[arg-type]
