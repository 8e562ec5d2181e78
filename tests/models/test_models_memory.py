"""A model build that outgrows its memory limit is built again under a larger one.

Not every DuckDB operator spills to disk and the build is one transaction, so a large
account's build needs more than the default bound (40,000 connections: about 600 MB).
A tiny limit stands in for that here.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

import diligence.analytics as analytics
from diligence.errors import ModelError
from diligence.warehouse import Warehouse

from .rawdb import AS_OF
from .synthetic import generate_raw

TOO_SMALL = "4MB"  # the build of 200 questionnaires needs more


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_raw(tmp_path_factory.mktemp("memory") / "warehouse.duckdb", 200, 30, 2, 2, 1)


def _copy(raw: Path, tmp_path: Path) -> Warehouse:
    path = tmp_path / "warehouse.duckdb"
    path.write_bytes(raw.read_bytes())
    return Warehouse(path)


def test_a_build_out_of_memory_is_built_again_with_more(
    raw: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    owner = _copy(raw, tmp_path)
    with caplog.at_level(logging.WARNING, logger="diligence.analytics"):
        with pytest.raises(ModelError) as plain:
            analytics.build_models(owner, as_of=AS_OF, memory_limit=TOO_SMALL)
        assert plain.value.out_of_memory
        result = analytics._build_within_memory(owner, memory_limit=TOO_SMALL, as_of=AS_OF)
    assert result.row_counts["analytics.questionnaire_completeness"] == 200
    assert f"need more than {TOO_SMALL} of memory" in caplog.text and "with 640MB" in caplog.text


def test_the_last_fallback_is_duckdbs_default_and_then_the_error_stands(
    raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    owner = _copy(raw, tmp_path)
    monkeypatch.setattr(analytics, "MODELS_MEMORY_FALLBACKS", ("5MB",))
    with pytest.raises(ModelError, match="Out of Memory"):
        analytics._build_within_memory(owner, memory_limit=TOO_SMALL, as_of=AS_OF)
    monkeypatch.setattr(analytics, "MODELS_MEMORY_FALLBACKS", (None,))
    with caplog.at_level(logging.WARNING, logger="diligence.analytics"):
        result = analytics._build_within_memory(owner, memory_limit=TOO_SMALL, as_of=AS_OF)
    assert "DuckDB's default" in caplog.text
    assert result.row_counts["analytics.questionnaire_completeness"] == 200


def test_other_failures_are_not_built_again(raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    owner = _copy(raw, tmp_path)
    calls: list[str | None] = []

    def failing(warehouse: object, *, memory_limit: str | None = None, **options: object) -> None:
        calls.append(memory_limit)
        raise ModelError("analytics.answers", "Binder Error: no such column")

    monkeypatch.setattr(analytics, "build_models", failing)
    with pytest.raises(ModelError, match="no such column"):
        analytics._build_within_memory(owner, memory_limit=TOO_SMALL)
    assert calls == [TOO_SMALL]
    # without a bound (DuckDB's default), nothing larger is tried either
    with pytest.raises(ModelError):
        analytics._build_within_memory(owner, memory_limit=None)
    assert calls == [TOO_SMALL, None]
