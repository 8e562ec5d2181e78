"""Rebuild the analytics schema: models, then checks, then the analysts' published copy.

The CLI (`diligence sync`, `diligence models`, `diligence demo`) and the Prefect flow
call :func:`rebuild_analytics`, so all of them leave the same things behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .checks import CheckResult, run_checks
from .models import ModelsResult, build_models
from .publish import publish_analytics, wait_until_writable
from .warehouse import writer_lock


@dataclass
class AnalyticsResult:
    models: ModelsResult
    checks: list[CheckResult]
    published: Path | None

    @property
    def failed_checks(self) -> list[CheckResult]:
        return [c for c in self.checks if not c.passed]


def rebuild_analytics(
    warehouse: Path,
    *,
    expiring_within_days: int = 30,
    as_of: datetime | None = None,
    wait_seconds: float = 0.0,
) -> AnalyticsResult:
    """Build the models in one transaction, run the checks, and publish the copy.

    The published copy (see :mod:`diligence.publish`) is only replaced when every
    check passed, so analysts never see a build that failed its checks.
    """
    with writer_lock(warehouse, wait_seconds=wait_seconds):
        wait_until_writable(warehouse, wait_seconds=wait_seconds)
        models = build_models(warehouse, expiring_within_days=expiring_within_days, as_of=as_of)
        checks = run_checks(warehouse)
        published = None
        if all(c.passed for c in checks):
            published = publish_analytics(warehouse)
    return AnalyticsResult(models=models, checks=checks, published=published)
