"""analytics.answer_changes and analytics.answer_history over questionnaire versions."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from diligence.analytics.models import build_models

from .helpers import by, rows
from .rawdb import AS_OF, SYNCED_AT, connection, create_raw, field, form, insert, questionnaire

NS = "ns"
T1 = SYNCED_AT - timedelta(days=14)
T2 = SYNCED_AT - timedelta(days=7)
T3 = SYNCED_AT


def version(answers: dict[str, str | None], extra_fields: list[dict] | None = None) -> list:
    fields = [field("h", "Label", "Heading")]
    fields += [
        field(field_id, "Input", f"Question {field_id}", None if v is None else {"value": v})
        for field_id, v in answers.items()
    ]
    return [form("f1", "Form", *fields, *(extra_fields or []))]


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three versions of one questionnaire and one of another, built once for the module
    (the tests only read it)."""
    path = create_raw(tmp_path_factory.mktemp("history") / "warehouse.duckdb")
    insert(path, "connections", [connection(NS, "c1", "Acme")])
    v1 = version(
        {
            "same": "x",
            "edited": "old",
            "answered": None,
            "cleared": "gone",
            "removed": "bye",
            "removed_blank": None,
        }
    )
    v2 = version(
        {
            "same": "x",
            "edited": "new",
            "answered": "now",
            "cleared": None,
            "added": "hello",
            "added_blank": None,
        }
    )
    v3 = version(
        {
            "same": "x",
            "edited": "newer",
            "answered": "now",
            "cleared": None,
            "added": "hello",
            "added_blank": None,
        }
    )
    insert(
        path,
        "questionnaires",
        [
            questionnaire(NS, "c1", "t1", v1, valid_from=T1, valid_to=T2),
            questionnaire(NS, "c1", "t1", v2, valid_from=T2, valid_to=T3),
            questionnaire(NS, "c1", "t1", v3, valid_from=T3),
            # a second questionnaire with a single version: no changes
            questionnaire(NS, "c1", "t2", v1, valid_from=T1),
        ],
    )
    build_models(path, as_of=AS_OF)
    return path


def test_changes_between_consecutive_versions(warehouse: Path) -> None:
    changes = rows(
        warehouse,
        "select * from analytics.answer_changes order by changed_at, field_id",
    )
    summary = [
        (
            c["changed_at"],
            c["field_id"],
            c["old_answer_text"],
            c["new_answer_text"],
            c["change_type"],
        )
        for c in changes
    ]
    assert summary == [
        (T2, "added", None, "hello", "field_added"),
        (T2, "answered", None, "now", "answered"),
        (T2, "cleared", "gone", None, "cleared"),
        (T2, "edited", "old", "new", "changed"),
        (T2, "removed", "bye", None, "field_removed"),
        (T3, "edited", "new", "newer", "changed"),
    ]
    assert all(c["company_type_id"] == "t1" for c in changes)
    assert by("field_id", changes)["edited"]["field_label"] == "Question edited"


def test_answers_show_only_the_current_version(warehouse: Path) -> None:
    current = by(
        "field_id",
        rows(warehouse, "select * from analytics.answers where company_type_id = 't1'"),
    )
    assert current["edited"]["answer_text"] == "newer"
    assert "removed" not in current
    assert current["edited"]["version_number"] == 3


def test_history_keeps_every_version(warehouse: Path) -> None:
    history = rows(
        warehouse,
        "select version_number, answer_text, is_current, versioned_at, superseded_at "
        "from analytics.answer_history "
        "where company_type_id = 't1' and field_id = 'edited' order by version_number",
    )
    assert [(h["version_number"], h["answer_text"], h["is_current"]) for h in history] == [
        (1, "old", False),
        (2, "new", False),
        (3, "newer", True),
    ]
    assert (history[0]["versioned_at"], history[0]["superseded_at"]) == (T1, T2)
