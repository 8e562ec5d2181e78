"""Rebuild the analytics schema: models, then checks, then the analysts' published copy.

One step of :mod:`diligence.steps`; the CLI (`diligence sync`, `diligence models`,
`diligence demo`) and the Prefect flow reach it through there, so all of them leave
the same things behind.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..config import DEFAULT_EXPIRING_WITHIN_DAYS, DEFAULT_TIMEZONE
from ..errors import ModelError
from ..warehouse import MODELS_MEMORY_FALLBACKS, MODELS_THREADS, Warehouse, models_memory_limit
from ..warehouse.limits import megabytes
from .checks import CheckResult
from .dbt import prepare
from .models import ModelsResult, build_models
from .publish import publish_analytics

log = logging.getLogger("diligence.analytics")


@dataclass
class AnalyticsResult:
    models: ModelsResult
    checks: list[CheckResult]
    published: Path | None

    @property
    def failed_checks(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.passed]


def rebuild_analytics(
    warehouse: Path | Warehouse,
    *,
    expiring_within_days: int = DEFAULT_EXPIRING_WITHIN_DAYS, as_of: datetime | None = None,
    wait_seconds: float = 0.0, full_refresh: bool = False, time_zone: str = DEFAULT_TIMEZONE,
) -> AnalyticsResult:
    """Build the models and run the checks (dbt's data tests) on them in one ``dbt
    build``, swap them into `analytics`, and publish the copy.

    The published copy of a file warehouse (see :mod:`diligence.analytics.publish`) is only
    replaced when every check passed, so analysts never see a build that failed its
    checks. A lake has none: analysts attach it read-only and read `analytics`, which
    the swap replaces in one transaction. `full_refresh` builds the history marts anew
    from all of `raw` instead of extending them (:mod:`.incremental`).
    """
    owner = warehouse if isinstance(warehouse, Warehouse) else Warehouse(warehouse)
    with owner.writing(wait_seconds=wait_seconds):
        # dbt opens the warehouse itself: a file is not held open meanwhile
        models = build_within_memory(owner, expiring_within_days=expiring_within_days, as_of=as_of,
                                      full_refresh=full_refresh, time_zone=time_zone)
        checks = models.checks
        published = None
        # a lake is read in place by analysts (read-only ATTACH): no copy
        if owner.path is not None and all(c.passed for c in checks):
            with owner.session(memory_limit=None) as con:
                published = publish_analytics(owner.path, con, models.history)
    return AnalyticsResult(models=models, checks=checks, published=published)


def warm_up() -> threading.Thread:
    """Import dbt and parse the project (about 4 s of CPU, see :mod:`.dbt`) in a background
    thread, started by a sync while it waits on the service: the model build after the
    load then starts at once. A failure is left to the build, which parses again and
    reports it. The thread is a daemon: a sync that fails early does not wait for it (dbt
    reparses a parse file cut short by the exit)."""

    def prepare_quietly() -> None:
        try:
            prepare("build")
        except Exception:  # noqa: BLE001 - the build parses again and reports it
            log.debug("dbt's warm-up failed; the build will parse again", exc_info=True)

    thread = threading.Thread(target=prepare_quietly, name="dbt-warm-up", daemon=True)
    thread.start()
    return thread


def build_within_memory(
    owner: Warehouse, *, memory_limit: str | Callable[[int, int], str] | None = models_memory_limit, **options: Any
) -> ModelsResult:
    """Build the models under a DuckDB memory limit (a file; a lake's has no tight bound)
    chosen before the build from the forms it will parse and the history rows it reads
    (`memory_limit`, a function, see :func:`~diligence.warehouse.models_memory_limit`; or
    a limit). Should DuckDB still run
    out of it, the build is made again under each larger one of ``MODELS_MEMORY_FALLBACKS``
    with a warning (a failed build leaves `analytics` as it was)."""
    used: list[str] = []

    def chosen(form_bytes: int, history_rows: int) -> str:
        used.append(memory_limit(form_bytes, history_rows) if callable(memory_limit) else str(memory_limit))
        return used[-1]

    limit: Callable[[int, int], str] | str | None = chosen if owner.path and memory_limit else None
    larger = iter(MODELS_MEMORY_FALLBACKS)
    while True:
        try:
            return build_models(owner, memory_limit=limit, duckdb_threads=MODELS_THREADS, **options)
        except ModelError as exc:
            if limit is None or not used or not exc.out_of_memory:
                raise
            following = next((f for f in larger if f is None or megabytes(f) > megabytes(used[-1])), used[-1])
            if following == used[-1]:
                raise
            log.warning(
                "the models need more than %s of memory at this size; building them again with %s",
                used[-1],
                following or "DuckDB's default (80 % of this machine's memory)",
            )
            limit = following
            used.extend([following] if following else [])
