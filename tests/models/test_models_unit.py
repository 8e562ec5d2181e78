"""The dbt project's unit tests (``unit_tests:`` in sql/models/): each reads fixed input
rows through one model and compares what it gives with the expected rows. They run
here, not in the scheduled builds (which exclude them)."""

from __future__ import annotations

from pathlib import Path

from diligence.analytics.checks import run_checks
from diligence.analytics.dbt import invoke, location_of


def test_the_projects_unit_tests_pass(clean_warehouse: Path) -> None:
    run = invoke(["test", "--select", "test_type:unit"], location_of(clean_warehouse),
                 target="analytics", read_only=True)
    assert run.error is None
    assert {node.name for node in run.nodes} >= {
        "answer_history_reads_every_answer_shape",
        "document_expiry_counts_calendar_days",
        "document_expiry_counts_the_days_of_the_configured_time_zone",
    }
    failed = {node.name: node.message for node in run.nodes if node.status != "pass"}
    assert failed == {}
    assert run.success


def test_the_build_leaves_the_unit_tests_out(clean_warehouse: Path) -> None:
    """A scheduled build and `diligence check` run the data tests only."""
    names = {result.name for result in run_checks(clean_warehouse)}
    assert "answer_history_reads_every_answer_shape" not in names
