"""Data checks: all pass on clean data, and each one fails on data broken for it."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import duckdb
import pytest

from diligence.analytics.checks import (
    CheckResult,
    check_names,
    failed_checks,
    format_failures,
    run_checks,
)
from diligence.analytics.dbt import PROJECT_DIR, prepare


def first_row(table: str) -> str:
    return f"rowid = (select min(rowid) from analytics.{table})"


def duplicate(table: str) -> str:
    return f"insert into analytics.{table} select * from analytics.{table} where {first_row(table)}"


def null_key(table: str, column: str) -> str:
    return (
        f"insert into analytics.{table} select * replace (null as {column}) "
        f"from analytics.{table} where {first_row(table)}"
    )


def set_value(table: str, assignment: str) -> str:
    return f"update analytics.{table} set {assignment} where {first_row(table)}"


# check name -> statement that breaks the clean warehouse for exactly that check
BREAKERS: dict[str, str] = {
    "answer_changes__accepted_change_type": set_value("answer_changes", "change_type = 'moved'"),
    "answers__company_is_counterparty_or_own": set_value("answers", "company_id = 'stranger'"),
    "answers__confirmed_after_versioned": set_value(
        "answers", "synced_at = versioned_at - interval 1 day"
    ),
    "connection_history__unique_key": duplicate("connection_history"),
    "connection_history__valid_versions": set_value("connection_history", "is_current = false"),
    "counterparties__connected_agrees": set_value("counterparties", "is_connected = false"),
    "counterparties__unique_key": duplicate("counterparties"),
    "document_expiry__pair_is_readable": set_value("document_expiry", "company_type_id = 't9'"),
    "document_history__current_matches_expiry": set_value("document_history", "is_current = false"),
    "document_history__unique_key": duplicate("document_history"),
    "document_history__valid_versions": set_value(
        "document_history", "valid_to = valid_from - interval 1 day"
    ),
    "namespaces__unique_key": duplicate("namespaces"),
    "headline__one_row": "insert into analytics.headline select * from analytics.headline",
    "sync_runs__unique_key": duplicate("sync_runs"),
    "changes__unique_key": duplicate("changes"),
    "changes__accepted_change_kind": set_value("changes", "change_kind = 'answer_moved'"),
    "service_keys__unique_key": duplicate("service_keys"),
    "answer_changes__is_change": set_value("answer_changes", "new_answer_text = old_answer_text"),
    "answer_changes__unique_key": duplicate("answer_changes"),
    "answer_history__unique_key": duplicate("answer_history"),
    "answers__answered_has_text": set_value("answers", "is_answered = not is_answered"),
    "answers__company_in_namespace": set_value("answers", "company_id = 'stranger'"),
    "answers__field_type_not_null": set_value("answers", "field_type = null"),
    "answers__no_labels": set_value("answers", "field_type = 'Label'"),
    "answers__unique_key": duplicate("answers"),
    "answers_wide__not_null_key": null_key("answers_wide", "company_id"),
    "answers_wide__unique_key": duplicate("answers_wide"),
    "answers_wide_columns__unique_column_name": "update analytics.answers_wide_columns "
    "set column_name = 'same'",
    "answers_wide_columns__unique_key": duplicate("answers_wide_columns"),
    "connections__unique_key": duplicate("connections"),
    "document_expiry__accepted_expiry_status": set_value(
        "document_expiry", "expiry_status = 'soon'"
    ),
    "document_expiry__company_in_namespace": set_value(
        "document_expiry", "company_id = 'stranger'"
    ),
    "document_expiry__unique_key": duplicate("document_expiry"),
    "questionnaire_completeness__answered_within_answerable": set_value(
        "questionnaire_completeness", "answered_fields = answerable_fields + 1"
    ),
    "questionnaire_completeness__pct_in_range": set_value(
        "questionnaire_completeness", "completeness_pct = 100.5"
    ),
    "questionnaire_completeness__unique_key": duplicate("questionnaire_completeness"),
    "reading_rights__accepted_direction": set_value("reading_rights", "direction = 'sideways'"),
    "reading_rights__unique_key": duplicate("reading_rights"),
    "sync_issues__unique_key": duplicate("sync_issues"),
}


def test_every_check_has_a_breaker() -> None:
    assert sorted(BREAKERS) == check_names()


def contracted_keys() -> dict[str, list[str]]:
    """The marts whose contract declares not_null key columns, with those columns."""
    import yaml

    keys = {}
    for path in (PROJECT_DIR / "models" / "marts").glob("*.yml"):
        for model in (yaml.safe_load(path.read_text()) or {}).get("models", []):
            if model.get("config", {}).get("contract", {}).get("enforced"):
                keys[model["name"]] = [c["name"] for c in model["columns"]
                                       if {"type": "not_null"} in c.get("constraints", [])]
    return keys


def test_the_contracts_keep_null_keys_out_of_the_published_tables(clean_warehouse: Path) -> None:
    """The marts' contracts declare their key columns not null, and DuckDB enforces it in
    `analytics` (the generic not_null_key test remains only for answers_wide, whose
    columns are the fields')."""
    keys = contracted_keys()
    assert set(keys) >= {"answers", "answer_history", "document_expiry", "connections", "sync_runs"}
    with duckdb.connect(str(clean_warehouse)) as con:
        enforced = {(table, columns[0]) for table, columns in con.execute(
            "select table_name, constraint_column_names from duckdb_constraints() "
            "where schema_name = 'analytics' and constraint_type = 'NOT NULL'").fetchall()}
        for table, columns in keys.items():
            assert {(table, column) for column in columns} <= enforced, table
            if columns and con.execute(f"select count(*) from analytics.{table}").fetchone()[0]:
                with pytest.raises(duckdb.ConstraintException, match="NOT NULL constraint failed"):
                    con.execute(null_key(table, columns[0]))


def test_all_checks_pass_on_clean_data(clean_warehouse: Path) -> None:
    results = run_checks(clean_warehouse)
    assert [r.name for r in results] == check_names()
    assert [r for r in results if not r.passed] == []
    assert failed_checks(results) == [] and format_failures(failed_checks(results)) == "all data checks passed"


def broken_table(check: str) -> str:
    (table,) = set(re.findall(r"analytics\.(\w+)", BREAKERS[check]))
    return table


def tables_read() -> dict[str, set[str]]:
    """check -> the models its test reads (from dbt's parse of the project)."""
    manifest = prepare("analytics")
    return {node.name: {ref.split(".")[-1] for ref in node.depends_on.nodes}
            for node in manifest.nodes.values() if node.resource_type.value == "test"}


def breaker_rounds() -> list[list[str]]:
    """The checks in rounds: one round's breakers are applied together to one copy of the
    clean warehouse, then the checks run once. No check of a round reads a table that
    another breaker of its round changes, so each check sees only its own breaker."""
    reads = tables_read()
    rounds: list[dict[str, str]] = []  # broken table -> check
    for check in sorted(BREAKERS):
        table = broken_table(check)
        free = next((members for members in rounds
                     if table not in members and not reads[check] & members.keys()
                     and not any(table in reads[other] for other in members.values())), None)
        if free is None:
            free = {}
            rounds.append(free)
        free[table] = check
    return [sorted(members.values()) for members in rounds]


@pytest.fixture(scope="module")
def broken_results(clean_template: Path, tmp_path_factory: pytest.TempPathFactory
                   ) -> dict[str, list[CheckResult]]:
    """check -> the results of all checks on a copy broken for it (and for the other
    checks of its round, which break other tables)."""
    results: dict[str, list[CheckResult]] = {}
    for number, checks in enumerate(breaker_rounds()):
        path = tmp_path_factory.mktemp(f"broken-{number}") / "warehouse.duckdb"
        shutil.copyfile(clean_template, path)
        with duckdb.connect(str(path)) as con:
            for check in checks:
                con.execute(BREAKERS[check])
        ran = run_checks(path)
        results.update(dict.fromkeys(checks, ran))
    return results


def test_each_check_of_a_round_sees_only_its_own_breaker() -> None:
    rounds = breaker_rounds()
    assert sorted(check for checks in rounds for check in checks) == sorted(BREAKERS)
    reads = tables_read()
    for checks in rounds:
        for check in checks:
            others = {broken_table(other) for other in checks if other != check}
            assert broken_table(check) in reads[check] and not reads[check] & others, (check, checks)
    assert len(rounds) < len(BREAKERS) / 3


@pytest.mark.parametrize("check", sorted(BREAKERS))
def test_check_fails_on_broken_data(broken_results: dict[str, list[CheckResult]], check: str) -> None:
    ran = broken_results[check]
    results = {r.name: r for r in ran}
    assert results[check].failing_rows >= 1
    assert check in format_failures(failed_checks(ran))


def test_failure_message_names_checks_and_counts() -> None:
    failures = [CheckResult("answers__unique_key", 3), CheckResult("connections__unique_key", 1)]
    assert format_failures(failures) == (
        "2 data checks failed: answers__unique_key (3 rows), connections__unique_key (1 row)"
    )
