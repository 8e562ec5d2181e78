"""App settings (not the source's): one typed model, validated once at the edge.

The source's own settings (URL, credentials, concurrency, ...) are the dlt
``@configspec`` in :mod:`pipelines.company_connections.config`; their values are checked
here too (:func:`check_source_settings`) before dlt resolves them. The app's come from
dlt config as well, and an explicit value (a CLI option, a flow parameter) always wins::

    [sources.company_connections]
    expiring_within_days = 30      # SOURCES__COMPANY_CONNECTIONS__EXPIRING_WITHIN_DAYS
    namespaces = ["..."]           # read by the source itself; the flow plans with it too
    [schedule]
    cron = "0 6 * * *"             # SCHEDULE__CRON
    timezone = "UTC"               # SCHEDULE__TIMEZONE
    [analytics]
    timezone = "Europe/Zurich"     # ANALYTICS__TIMEZONE: whose calendar days expiry counts
    [warehouse]
    location = "data/warehouse.duckdb"   # or ducklake:postgres:<conninfo>; DILIGENCE_WAREHOUSE
    data_path = "/srv/lake"              # a lake's Parquet files; DILIGENCE_DATA_PATH
    file_mode = "owner"            # DILIGENCE_FILE_MODE; "group": 0640/0750 (see filemodes)
    s3_region = "eu-central-1"     # s3_* (see diligence.warehouse.storage); AWS_* win
    [export]
    csv_raw = false                # EXPORT__CSV_RAW: no formula guard in CSV exports
    [exports]
    keep = 30                      # EXPORTS__KEEP: run folders kept under the reports root
    [notifications]
    block = "custom-webhook/diligence-alerts"  # NOTIFICATIONS__BLOCK: <type slug>/<name>
    kinds = ["document_newly_expired", "namespace_failed"]  # NOTIFICATIONS__KINDS: default all
    [evidence]
    enabled = true                 # EVIDENCE__ENABLED: keep every response and manifest
    path = "/srv/evidence"         # DILIGENCE_EVIDENCE: default beside the warehouse
    retain_days = 400              # EVIDENCE__RETAIN_DAYS: default keep everything
    heartbeat_seconds = 5          # EVIDENCE__HEARTBEAT_SECONDS: a bucket's pushes

:func:`settings` reads every key once (per process and environment) into
:class:`AppSettings`; a value of the wrong type or out of range is a
:class:`~diligence.errors.SettingsError` of one line naming the key, the value and the
variable that set it (exit code 2), raised before anything is created. Every reader
below asks it; callers outside ``diligence`` (the Prefect flow, its deployment) read
settings through these functions, never from ``dlt.config`` themselves, so every
setting has one reader and one default. Nothing is imported from dlt until a value is
looked up.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    TypeAdapter,
    ValidationError,
)

from .errors import SettingsError

__all__ = [
    "AppSettings",
    "DEFAULT_CRON",
    "DEFAULT_EVIDENCE_ENABLED",
    "DEFAULT_EXPIRING_WITHIN_DAYS",
    "DEFAULT_EXPORTS_KEEP",
    "DEFAULT_LOCK_WAIT_SECONDS",
    "DEFAULT_REPORTS_DIR",
    "DEFAULT_TIMEZONE",
    "DEFAULT_WAREHOUSE",
    "DEMO_WAREHOUSE",
    "EVIDENCE_ENV",
    "FILE_MODES",
    "check_source_settings",
    "configured",
    "configured_expiring_within_days",
    "configured_namespaces",
    "configured_secret",
    "analytics_timezone",
    "csv_raw",
    "evidence_enabled",
    "evidence_path",
    "evidence_retain_days",
    "expiring_within_days",
    "exports_keep",
    "file_mode",
    "notification_block",
    "notification_kinds",
    "schedule_settings",
    "settings",
]

DEFAULT_WAREHOUSE = Path("data/warehouse.duckdb")
#: Where `diligence demo` syncs the sandbox (kept apart from the user's own warehouse).
DEMO_WAREHOUSE = Path("data/demo.duckdb")
DEFAULT_REPORTS_DIR = Path("reports")
DEFAULT_EXPIRING_WITHIN_DAYS = 30
#: Run folders an export keeps under the reports root (``[exports] keep``).
DEFAULT_EXPORTS_KEEP = 30
#: The schedule of the scheduled flow (``[schedule] cron`` / ``timezone``); prefect.yaml
#: carries the same values (tests/flows/test_prefect_yaml.py holds them equal).
DEFAULT_CRON = "0 6 * * *"
DEFAULT_TIMEZONE = "UTC"
#: Seconds a writer that runs unattended (a flow's step, a worker sealing evidence into a
#: bucket) waits for a lock another writer holds (the warehouse's writer lock, the
#: evidence chain's lock) before it gives up; a sync of a large account can hold the
#: warehouse that long. The CLI waits only when told (``--wait``).
DEFAULT_LOCK_WAIT_SECONDS = 600.0
#: Whether syncs keep their evidence (``[evidence] enabled``).
DEFAULT_EVIDENCE_ENABLED = True
#: Who may read the confidential files: the owner only (default), or the group too.
FILE_MODES: tuple[str, ...] = ("owner", "group")
FILE_MODE_ENV = "DILIGENCE_FILE_MODE"
EVIDENCE_ENV = "DILIGENCE_EVIDENCE"
WAREHOUSE_ENV = "DILIGENCE_WAREHOUSE"
DATA_PATH_ENV = "DILIGENCE_DATA_PATH"
DEFAULT_HEARTBEAT_SECONDS = 5.0

#: key -> the variable of ours that sets it, before dlt's config
ALIASES = {"warehouse.location": WAREHOUSE_ENV, "warehouse.data_path": DATA_PATH_ENV,
           "warehouse.file_mode": FILE_MODE_ENV, "evidence.path": EVIDENCE_ENV}
#: keys read from dlt's secrets (``.dlt/secrets.toml``), not its config
SECRET_SETTINGS = ("warehouse.s3_secret_access_key", "warehouse.s3_session_token")


def _comma_list(value: Any) -> Any:
    """A list given as one string (an env var: JSON, ``["a", "b"]``, or comma-separated,
    ``a,b``), as a list."""
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _known_zone(value: Any) -> Any:
    """An IANA time zone name (``Europe/Zurich``), as it is; anything else is refused."""
    import zoneinfo

    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise ValueError("is not a known time zone (an IANA name such as UTC or Europe/Zurich)") from None
    return value


def _lower(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Text = Annotated[str, Field(min_length=1)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class WarehouseSection(_Section):
    location: Text | None = None
    data_path: Text | None = None
    file_mode: Annotated[Literal["owner", "group"], BeforeValidator(_lower)] = "owner"
    s3_access_key_id: Text | None = None
    s3_secret_access_key: SecretStr | None = None
    s3_session_token: SecretStr | None = None
    s3_region: Text | None = None
    s3_endpoint_url: Text | None = None


class EvidenceSection(_Section):
    enabled: bool = DEFAULT_EVIDENCE_ENABLED
    path: Text | None = None
    retain_days: Positive | None = None
    heartbeat_seconds: Positive = DEFAULT_HEARTBEAT_SECONDS


class ScheduleSection(_Section):
    cron: Text = DEFAULT_CRON
    timezone: Text = DEFAULT_TIMEZONE


class AnalyticsSection(_Section):
    timezone: Annotated[Text, AfterValidator(_known_zone)] = DEFAULT_TIMEZONE


class NotificationsSection(_Section):
    block: Text | None = None
    kinds: Annotated[list[Text] | None, BeforeValidator(_comma_list)] = None


class ExportSection(_Section):
    csv_raw: bool = False


def _no_bool(value: Any) -> Any:
    """A boolean is not a count (pydantic would read ``true`` as 1)."""
    if isinstance(value, bool):
        raise ValueError("input should be a whole number, not a boolean")
    return value


class ExportsSection(_Section):
    keep: Annotated[int, Field(gt=0), BeforeValidator(_no_bool)] = DEFAULT_EXPORTS_KEEP


class SourceSection(_Section):
    """What the app reads of the source's section (the source checks the rest)."""

    expiring_within_days: Annotated[int, Field(ge=0, le=36500)] = DEFAULT_EXPIRING_WITHIN_DAYS
    namespaces: Annotated[list[Text] | None, BeforeValidator(_comma_list)] = None


class AppSettings(_Section):
    """Every app setting, typed, with its one default."""

    warehouse: WarehouseSection = WarehouseSection()
    evidence: EvidenceSection = EvidenceSection()
    schedule: ScheduleSection = ScheduleSection()
    analytics: AnalyticsSection = AnalyticsSection()
    notifications: NotificationsSection = NotificationsSection()
    export: ExportSection = ExportSection()
    exports: ExportsSection = ExportsSection()
    source: SourceSection = SourceSection()


#: the model's sections -> their place in dlt's config
_SECTIONS = {"warehouse": "warehouse", "evidence": "evidence", "schedule": "schedule", "analytics": "analytics",
             "notifications": "notifications", "export": "export", "exports": "exports",
             "source": "sources.company_connections"}


def configured(key: str, hint: type | None = None) -> object | None:
    """The value of `key` in dlt's config (files and env), or None if unset (`hint`:
    coerced by dlt; None: as it was written)."""
    import dlt  # start-up (dlt 0.9 s of imports): dlt loads only when a setting is looked up, not on --help

    return dlt.config.get(key, hint)


def configured_secret(key: str, hint: type | None = None) -> object | None:
    """The value of `key` in dlt's secrets (``.dlt/secrets.toml``, env), or None if unset."""
    import dlt  # start-up: see configured()

    return dlt.secrets.get(key, hint)


def env_name(key: str) -> str:
    """dlt's environment variable for `key` (``evidence.retain_days`` -> ``EVIDENCE__RETAIN_DAYS``)."""
    return key.replace(".", "__").upper()


def _where(key: str) -> str:
    """Which variable set `key` (or where else it can have come from)."""
    alias = ALIASES.get(key)
    if alias and os.environ.get(alias):
        return f"set by {alias}"
    if os.environ.get(env_name(key)) is not None:
        return f"set by {env_name(key)}"
    secrets = key in SECRET_SETTINGS or key.startswith("sources.")
    files = ".dlt/config.toml or .dlt/secrets.toml" if secrets else ".dlt/config.toml"
    return f"set in {files}; env {env_name(key)}{f' or {alias}' if alias else ''}"


def _raw(key: str) -> Any:
    alias = ALIASES.get(key)
    if alias and os.environ.get(alias):
        return os.environ[alias]
    return configured_secret(key) if key in SECRET_SETTINGS else configured(key)


def _invalid(key: str, error: dict[str, Any], value: Any) -> SettingsError:
    section, _, name = key.rpartition(".")
    shown = "*** (a secret)" if key in SECRET_SETTINGS else repr(value)
    message = str(error.get("msg", "is not valid")).removeprefix("Value error, ")
    return SettingsError(f"[{section}] {name} = {shown}: {message[:1].lower()}{message[1:]} ({_where(key)})")


def _fingerprint() -> tuple[Any, ...]:
    """What the settings depend on besides dlt's files: the folder and the variables."""
    return (os.getcwd(), tuple(sorted((k, v) for k, v in os.environ.items() if "__" in k or k.startswith(
        ("DILIGENCE_", "AWS_")))))


_cache: dict[tuple[Any, ...], AppSettings] = {}


def settings() -> AppSettings:
    """The app's settings, read and validated once per process and environment; one
    :class:`SettingsError` line for the first value that is not valid."""
    fingerprint = _fingerprint()
    found = _cache.get(fingerprint)
    if found is not None:
        return found
    values: dict[str, dict[str, Any]] = {}
    for section, place in _SECTIONS.items():
        model = AppSettings.model_fields[section].annotation
        raw = {name: value for name in model.model_fields  # type: ignore[union-attr]
               if (value := _raw(f"{place}.{name}")) is not None}
        values[section] = raw
    try:
        found = AppSettings.model_validate(values)
    except ValidationError as exc:
        error = exc.errors()[0]
        section, name = error["loc"][0], error["loc"][1] if len(error["loc"]) > 1 else ""
        key = f"{_SECTIONS[str(section)]}.{name}"
        raise _invalid(key, dict(error), values.get(str(section), {}).get(str(name))) from None
    _cache.clear()
    _cache[fingerprint] = found
    return found


def check_source_settings(limits: dict[str, Any], given: dict[str, Any]) -> None:
    """Check the source's configured values (those `given` explicitly win, and are
    checked too) against `limits` (setting -> type with its bounds, declared beside the
    source's ``@configspec``): one :class:`SettingsError` line for the first one that is
    not valid, before dlt resolves them."""
    for name, kind in limits.items():
        key = f"sources.company_connections.{name}"
        value = given[name] if given.get(name) is not None else configured(key)
        if value is None:
            continue
        try:
            TypeAdapter(kind).validate_python(value)
        except ValidationError as exc:
            raise _invalid(key, dict(exc.errors()[0]), value) from None


def configured_expiring_within_days() -> int | None:
    """`sources.company_connections.expiring_within_days` if it is set, else None."""
    return settings().source.expiring_within_days if "expiring_within_days" in _set("source") else None


def _set(section: str) -> set[str]:
    return set(getattr(settings(), section).model_fields_set)


def expiring_within_days(value: int | None = None) -> int:
    """Days ahead that count as 'expiring': `value`, else config, else
    :data:`DEFAULT_EXPIRING_WITHIN_DAYS`. Asked once per
    build, by :func:`diligence.steps.analytics_step`; every other caller passes None on."""
    return int(value) if value is not None else settings().source.expiring_within_days


def analytics_timezone(value: str | None = None) -> str:
    """The time zone whose calendar days `days_until_expiry` and the expiry statuses
    count: `value`, else config ``analytics.timezone``, else UTC. Asked once per build,
    by :func:`diligence.steps.analytics_step`."""
    return str(_known_zone(value)) if value is not None else settings().analytics.timezone


def csv_raw(value: bool = False) -> bool:
    """Whether CSV exports skip the formula guard: `value` (`--csv-raw`), else
    `export.csv_raw` from config, else False (the guard is on)."""
    return bool(value) or settings().export.csv_raw


def exports_keep() -> int:
    """How many run folders an export keeps under the reports root: config ``[exports]
    keep`` (env ``EXPORTS__KEEP``), else :data:`DEFAULT_EXPORTS_KEEP`; a whole number
    above 0 (checked with every setting, see :func:`settings`)."""
    return settings().exports.keep


def configured_namespaces() -> list[str]:
    """`sources.company_connections.namespaces` from config, or an empty list."""
    return list(settings().source.namespaces or [])


def schedule_settings(cron: str | None = None, timezone: str | None = None) -> tuple[str, str]:
    """(cron, timezone): the arguments, else config `schedule.*`, else :data:`DEFAULT_CRON`
    in :data:`DEFAULT_TIMEZONE`."""
    schedule = settings().schedule
    return str(cron or schedule.cron), str(timezone or schedule.timezone)


def file_mode(value: str | None = None) -> str:
    """``owner`` or ``group``: `value`, else env ``DILIGENCE_FILE_MODE``, else config
    ``warehouse.file_mode``, else ``owner``. Raises SettingsError for anything else."""
    if value is None:
        return settings().warehouse.file_mode
    chosen = str(value).strip().lower()
    if chosen not in FILE_MODES:
        raise SettingsError(f"file_mode must be one of {', '.join(FILE_MODES)}, not {value!r}")
    return chosen


def notification_block(value: str | None = None) -> str | None:
    """Name of the Prefect notification block for run alerts: `value`, else config
    ``notifications.block``, else None (no alerts)."""
    return value or settings().notifications.block


def notification_kinds(value: list[str] | str | None = None) -> list[str] | None:
    """The kinds a notification carries, as given: `value`, else config
    ``notifications.kinds`` (a list, or one comma-separated string), else None (every
    kind). :func:`diligence.analytics.digest.parse_kinds` checks them."""
    chosen = _comma_list(value) if value is not None else settings().notifications.kinds
    return list(chosen) if chosen else None


def evidence_enabled(value: bool | None = None) -> bool:
    """Whether syncs keep their evidence: `value`, else config ``evidence.enabled``, else
    :data:`DEFAULT_EVIDENCE_ENABLED`."""
    return bool(value) if value is not None else settings().evidence.enabled


def evidence_path(value: str | Path | None = None) -> str | None:
    """Where the evidence store is: `value` (``--evidence``), else env
    ``DILIGENCE_EVIDENCE``, else config ``evidence.path``, else None (beside the
    warehouse, see :attr:`diligence.warehouse.Warehouse.evidence_root`)."""
    return str(value) if value else settings().evidence.path


def evidence_retain_days(value: float | None = None) -> float | None:
    """Days a sync's evidence is kept by ``diligence evidence prune``: `value`, else config
    ``evidence.retain_days``, else None (everything is kept)."""
    if value is None:
        return settings().evidence.retain_days
    if not float(value) > 0:
        raise SettingsError(f"retain_days must be positive, not {value}")
    return float(value)


def heartbeat_seconds(value: float | None = None) -> float:
    """Seconds between a sync's pushes to an evidence bucket: `value`, else ``[evidence]
    heartbeat_seconds``, else 5."""
    if value is None:
        return settings().evidence.heartbeat_seconds
    if not float(value) > 0:
        raise SettingsError(f"evidence.heartbeat_seconds must be positive, not {value}")
    return float(value)
