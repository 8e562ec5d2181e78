"""The dbt project's vars are config's defaults: an analyst's own `dbt build` (with the
profile of `diligence dbt-profile`) counts expiry as `diligence models` does. dbt cannot
import them, so this test holds the two equal."""

from __future__ import annotations

import yaml

from diligence.analytics.dbt import PROJECT_DIR
from diligence.config import DEFAULT_EXPIRING_WITHIN_DAYS, DEFAULT_TIMEZONE


def test_the_projects_vars_are_configs_defaults() -> None:
    project = yaml.safe_load((PROJECT_DIR / "dbt_project.yml").read_text(encoding="utf-8"))
    assert project["vars"]["expiring_within_days"] == DEFAULT_EXPIRING_WITHIN_DAYS
    assert project["vars"]["time_zone"] == DEFAULT_TIMEZONE
