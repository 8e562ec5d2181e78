"""Data checks on the `analytics` schema: the dbt project's data tests.

Each check is a dbt test returning the offending rows, passing when it returns none:
the key tests (``unique_key``, ``accepted_values``) are declared in each mart's YAML
(`sql/models/marts/<model>.yml`), the others are singular tests in `sql/tests/`; keys
that must not be NULL are the marts' contracts, which DuckDB enforces as the build
writes them. A check's name is ``<model>__<what it checks>``. A build runs them with
its models (``dbt build`` on target ``build``, where they warn instead of failing, so a failing check
never skips a model: :mod:`diligence.analytics.models`); :func:`run_checks` runs them alone with
``dbt test`` on target ``analytics`` (see :mod:`diligence.analytics.dbt`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import DbtError
from ..warehouse.location import WarehouseLocation
from .dbt import PROJECT_DIR, DbtRun, describe_failure, invoke, location_of


@dataclass(frozen=True)
class CheckResult:
    name: str
    failing_rows: int

    @property
    def passed(self) -> bool:
        return self.failing_rows == 0


def check_names() -> list[str]:
    """All checks, by name, sorted (the data tests of the dbt project)."""
    names = {path.stem for path in (PROJECT_DIR / "tests").glob("*.sql")}
    for path in (PROJECT_DIR / "models").rglob("*.yml"):
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        for model in document.get("models", []):
            tests = list(model.get("data_tests", []))
            for column in model.get("columns", []):
                tests += column.get("data_tests", [])
            for test in tests:
                if isinstance(test, dict):
                    (definition,) = test.values()
                    if isinstance(definition, dict) and "name" in definition:
                        names.add(definition["name"])
    return sorted(names)


def run_checks(
    warehouse: Path | str | WarehouseLocation | Any, *, project_dir: Path | None = None
) -> list[CheckResult]:
    """Run every check against the warehouse's `analytics` (a DuckDB file, a parsed
    location, or a :class:`~diligence.warehouse.Warehouse`); one result per check,
    sorted by name. Raises :class:`~diligence.analytics.dbt.DbtError` when a check cannot run."""
    # the project's unit tests run in its own test suite, not against the data
    run = invoke(["test", "--exclude-resource-type", "unit_test"], location_of(warehouse),
                 target="analytics", project_dir=project_dir or PROJECT_DIR)
    return check_results(run, "dbt test")


def check_results(run: DbtRun, doing: str) -> list[CheckResult]:
    """The checks of a dbt invocation (`dbt test`, or the tests of `dbt build`), one per
    test, sorted by name. Raises :class:`~diligence.analytics.dbt.DbtError` when a test could not
    run (`doing` names the invocation in the message)."""
    errors = [node for node in run.nodes
              if node.resource_type == "test" and node.status in ("error", "runtime error")]
    if run.error is not None or errors:
        raise DbtError(describe_failure(run, doing), node=errors[0].name if errors else None)
    return sorted(
        (
            CheckResult(name=node.name, failing_rows=int(node.failures or 0))
            for node in run.nodes
            if node.resource_type == "test"
        ),
        key=lambda result: result.name,
    )


def failed_checks(results: list[CheckResult]) -> list[CheckResult]:
    return [result for result in results if not result.passed]


def format_failures(failures: list[CheckResult]) -> str:
    """The one wording of failed checks, wherever they are reported:
    '2 data checks failed: answers__unique_key (3 rows), ...' or 'all data checks passed'."""
    if not failures:
        return "all data checks passed"
    listed = ", ".join(
        f"{f.name} ({f.failing_rows} row{'s' if f.failing_rows != 1 else ''})" for f in failures
    )
    return f"{len(failures)} data check{'s' if len(failures) != 1 else ''} failed: {listed}"
