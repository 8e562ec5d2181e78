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

    The published copy (see :mod:`diligence.publish`) is only replaced when every
    check passed, so analysts never see a build that failed its checks.
    """
    owner = warehouse if isinstance(warehouse, Warehouse) else Warehouse(warehouse)
    with owner.writing(wait_seconds=wait_seconds):
        with owner.session():  # DuckDB opened once for the build, its memory bounded
            models = build_models(owner.path, expiring_within_days=expiring_within_days, as_of=as_of)
        checks = run_checks(owner.path)
        published = None
        if all(c.passed for c in checks):
            published = publish_analytics(owner.path)
    return AnalyticsResult(models=models, checks=checks, published=published)
