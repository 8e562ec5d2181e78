"""The synthetic scale helper works, also with several syncs of history (its timing on
the `large` profile is run by hand: `.venv/bin/python -m tests.models.synthetic large`)."""

from __future__ import annotations

from pathlib import Path

import duckdb

from diligence.analytics.models import build_models

from .helpers import scalar
from .rawdb import AS_OF
from .synthetic import PROFILES, generate_raw, time_build


def test_synthetic_build_small() -> None:
    seconds, result = time_build(questionnaires=100, fields_per_questionnaire=30)
    assert seconds > 0
    assert result.row_counts["analytics.questionnaire_completeness"] == 100
    # every fifth field type is a Label, so 24 answerable fields per questionnaire
    assert result.row_counts["analytics.answers"] == 100 * 24
    assert result.row_counts["analytics.document_expiry"] == 300


def test_synthetic_history_builds_and_passes_checks(tmp_path: Path) -> None:
    profile = PROFILES["small"]
    path = generate_raw(
        tmp_path / "history.duckdb",
        profile.questionnaires,
        profile.fields_per_questionnaire,
        profile.namespaces,
        profile.company_types,
        profile.syncs,
    )
    result = build_models(path, as_of=AS_OF)
    assert result.checks and [r.name for r in result.checks if not r.passed] == []
    counts = result.row_counts
    assert counts["analytics.sync_runs"] == profile.namespaces * profile.syncs
    assert counts["analytics.freshness"] == profile.namespaces
    # every version of a connection or document is a history row, current ones included
    assert counts["analytics.connection_history"] == scalar(
        path, "select count(*) from raw.connections"
    )
    assert counts["analytics.document_history"] == scalar(
        path, "select count(*) from raw.documents"
    )
    assert counts["analytics.document_expiry"] == scalar(
        path, "select count(*) from raw.documents where _dlt_valid_to is null"
    )
    # the shared companies are one counterparty each, whatever the number of namespaces
    assert counts["analytics.counterparties"] == scalar(
        path,
        "select count(distinct company_id) from raw.connections",
    )
    changes = dict(
        duckdb_rows(path, "select change_type, count(*) from analytics.answer_changes group by 1")
    )
    # each questionnaire changed once changes every answered Input field
    assert changes["changed"] == scalar(
        path,
        "select count(*) from analytics.answer_history where answer_text like 'earlier answer %'",
    )
    assert changes["access_withdrawn"] == changes["restored"] > 0
    assert changes["disconnected"] > 0


def duckdb_rows(path: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql).fetchall()
