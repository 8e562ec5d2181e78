"""Data checks on the `analytics` schema.

Each check is a query in `sql/checks/<model>__<check>.sql` returning the offending
rows; a check passes when it returns none. Checks run on a read-only connection, after
`build_models` has closed its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

CHECKS_DIR = Path(__file__).resolve().parent.parent / "sql" / "checks"


@dataclass(frozen=True)
class CheckResult:
    name: str
    failing_rows: int

    @property
    def passed(self) -> bool:
        return self.failing_rows == 0


class ChecksFailed(Exception):
    """One or more checks returned offending rows."""

    def __init__(self, failures: list[CheckResult]) -> None:
        super().__init__(format_failures(failures))
        self.failures = failures


def check_names() -> list[str]:
    """All checks, by name (file stem), sorted."""
    return sorted(path.stem for path in CHECKS_DIR.glob("*.sql"))


def run_checks(warehouse: Path | duckdb.DuckDBPyConnection) -> list[CheckResult]:
    """Run every check against the warehouse (a DuckDB file, or an open connection, e.g.
    to a lake, that the caller closes); one result per check, sorted by name."""
    if isinstance(warehouse, duckdb.DuckDBPyConnection):
        return _run_checks(warehouse)
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return _run_checks(con)


def _run_checks(con: duckdb.DuckDBPyConnection) -> list[CheckResult]:
    results: list[CheckResult] = []
    for name in check_names():
        sql = (CHECKS_DIR / f"{name}.sql").read_text(encoding="utf-8")
        count = con.execute(f"select count(*) from (\n{sql}\n)").fetchone()[0]
        results.append(CheckResult(name=name, failing_rows=int(count)))
    return results


def failed_checks(results: list[CheckResult]) -> list[CheckResult]:
    return [result for result in results if not result.passed]


def format_failures(failures: list[CheckResult]) -> str:
    """'2 checks failed: answers__unique_key (3 rows), ...' or 'all checks passed'."""
    if not failures:
        return "all checks passed"
    listed = ", ".join(
        f"{f.name} ({f.failing_rows} row{'s' if f.failing_rows != 1 else ''})" for f in failures
    )
    return f"{len(failures)} check{'s' if len(failures) != 1 else ''} failed: {listed}"


def raise_for_failures(results: list[CheckResult]) -> None:
    """Raise ChecksFailed naming every failing check and its count of offending rows."""
    failures = failed_checks(results)
    if failures:
        raise ChecksFailed(failures)


def checks_exit_code(results: list[CheckResult]) -> int:
    """0 when every check passed, else 1."""
    return 1 if failed_checks(results) else 0
