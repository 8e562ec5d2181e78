"""Rebuild the analytics schema: models, then checks, then the analysts' published copy.

One step of :mod:`diligence.steps`; the CLI (`diligence sync`, `diligence models`,
`diligence demo`) and the Prefect flow reach it through there, so all of them leave
the same things behind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..config import DEFAULT_EXPIRING_WITHIN_DAYS, DEFAULT_TIMEZONE
from ..errors import ModelError
from ..warehouse import MODELS_MEMORY_FALLBACKS, MODELS_THREADS, Warehouse, models_memory_limit
from ..warehouse.limits import megabytes
from ..warehouse.location import WarehouseLocation
from . import aside
from .checks import CheckResult
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
    build``, swap them into `analytics`, and publish the copy: in the process
    :func:`warm_up` started, if one waits (:mod:`.aside`), else in this one.

    The published copy of a file warehouse (see :mod:`diligence.analytics.publish`) is only
    replaced when every check passed, so analysts never see a build that failed its
    checks. A lake has none: analysts attach it read-only and read `analytics`, which
    the swap replaces in one transaction. `full_refresh` builds the history marts anew
    from all of `raw` instead of extending them (:mod:`.incremental`).
    """
    owner = warehouse if isinstance(warehouse, Warehouse) else Warehouse(warehouse)
    options = {"expiring_within_days": expiring_within_days, "as_of": as_of,
               "full_refresh": full_refresh, "time_zone": time_zone}
    with owner.writing(wait_seconds=wait_seconds):
        builder = aside.take()
        if builder is not None:
            return builder.build(owner.location, **options)  # type: ignore[no-any-return]
        return build_and_publish(owner, **options)


def build_and_publish(warehouse: Warehouse | WarehouseLocation, **options: Any) -> AnalyticsResult:
    """:func:`rebuild_analytics`'s work, under the writer lock its caller holds."""
    owner = warehouse if isinstance(warehouse, Warehouse) else Warehouse(warehouse)
    # dbt opens the warehouse itself: a file is not held open meanwhile
    models = build_within_memory(owner, **options)
    published = None
    # a lake is read in place by analysts (read-only ATTACH): no copy
    if owner.path is not None and all(c.passed for c in models.checks):
        with owner.session(memory_limit=None) as con:
            published = publish_analytics(owner.path, con, models.history)
    return AnalyticsResult(models=models, checks=models.checks, published=published)


def warm_up() -> aside.ModelBuilder | None:
    """Start the process the next :func:`rebuild_analytics` builds in: a sync calls it
    before its fetch, so that dbt's imports and parse run on another core meanwhile
    (:mod:`.aside`; None when this process has dbt loaded and builds in place)."""
    return aside.start(build_and_publish)


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
