"""Rebuild the analytics schema: models, then checks, then the analysts' published copy.

One step of :mod:`diligence.steps`; the CLI (`diligence sync`, `diligence models`,
`diligence demo`) and the Prefect flow reach it through there, so all of them leave
the same things behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .checks import CheckResult, run_checks
from .models import ModelsResult, build_models
from .publish import publish_analytics
from .warehouse import Warehouse


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
    expiring_within_days: int = 30,
    as_of: datetime | None = None,
    wait_seconds: float = 0.0,
) -> AnalyticsResult:
    """Build the models in one transaction, run the checks, and publish the copy.

    The published copy of a file warehouse (see :mod:`diligence.publish`) is only
    replaced when every check passed, so analysts never see a build that failed its
    checks. A lake has none: analysts attach it read-only.
    """
    owner = warehouse if isinstance(warehouse, Warehouse) else Warehouse(warehouse)
    with owner.writing(wait_seconds=wait_seconds):
        # DuckDB opened (or the lake attached) once for the build, the checks and the
        # copy, its memory bounded
        with owner.session() as con:
            models = build_models(con, expiring_within_days=expiring_within_days, as_of=as_of)
            checks = run_checks(con)
            published = None
            # a lake is read in place by analysts (read-only ATTACH): no copy
            if owner.path is not None and all(c.passed for c in checks):
                published = publish_analytics(owner.path, con)
    return AnalyticsResult(models=models, checks=checks, published=published)
