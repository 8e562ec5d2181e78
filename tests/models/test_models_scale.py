"""The synthetic scale helper works (its timing at 10,000 questionnaires is run by hand:
`.venv/bin/python -m tests.models.synthetic`)."""

from __future__ import annotations

from .synthetic import time_build


def test_synthetic_build_small() -> None:
    seconds, result = time_build(questionnaires=100, fields_per_questionnaire=30)
    assert seconds > 0
    assert result.row_counts["analytics.questionnaire_completeness"] == 100
    # every fifth field type is a Label, so 24 answerable fields per questionnaire
    assert result.row_counts["analytics.answers"] == 100 * 24
    assert result.row_counts["analytics.document_expiry"] == 300
