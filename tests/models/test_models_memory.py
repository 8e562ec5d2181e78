"""The model build's memory limit is chosen from what the build parses, before it starts;
a build that still outgrows it is built again under a larger one.

Not every DuckDB operator spills to disk and the build is one transaction, so a build
that parses more forms needs more than the default bound (the whole history of `large`
after 1,000 syncs: 320 MB). A tiny limit stands in for a wrong choice here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

import diligence.analytics as analytics
from diligence.analytics.incremental import STATE_TABLE, form_bytes_to_read, history_rows
from diligence.errors import ModelError
from diligence.warehouse import MODELS_MEMORY_LIMIT, Warehouse, models_memory_limit

from .rawdb import AS_OF, SYNCED_AT, create_raw, insert, questionnaire
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
        result = analytics.build_within_memory(owner, memory_limit=TOO_SMALL, as_of=AS_OF)
    assert result.row_counts["analytics.questionnaire_completeness"] == 200
    assert f"need more than {TOO_SMALL} of memory" in caplog.text and "with 640MB" in caplog.text


def test_the_last_fallback_is_duckdbs_default_and_then_the_error_stands(
    raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    owner = _copy(raw, tmp_path)
    monkeypatch.setattr(analytics, "MODELS_MEMORY_FALLBACKS", ("5MB",))
    with pytest.raises(ModelError, match="Out of Memory") as raised:
        analytics.build_within_memory(owner, memory_limit=TOO_SMALL, as_of=AS_OF)
    assert raised.value.out_of_memory  # what tells a build to be tried again with more
    monkeypatch.setattr(analytics, "MODELS_MEMORY_FALLBACKS", (None,))
    with caplog.at_level(logging.WARNING, logger="diligence.analytics"):
        result = analytics.build_within_memory(owner, memory_limit=TOO_SMALL, as_of=AS_OF)
    assert "DuckDB's default" in caplog.text
    assert result.row_counts["analytics.questionnaire_completeness"] == 200


def test_other_failures_are_not_built_again(raw: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    owner = _copy(raw, tmp_path)
    calls: list[str | None] = []

    def failing(warehouse: object, *, memory_limit: Callable[[int, int], str] | str | None = None,
                **options: object) -> None:
        calls.append(memory_limit(0, 0) if callable(memory_limit) else memory_limit)  # the limit it chose
        raise ModelError("analytics.answers", "Binder Error: no such column")

    monkeypatch.setattr(analytics, "build_models", failing)
    with pytest.raises(ModelError, match="no such column"):
        analytics.build_within_memory(owner, memory_limit=TOO_SMALL)
    assert calls == [TOO_SMALL]
    # without a bound (DuckDB's default), nothing larger is tried either
    with pytest.raises(ModelError):
        analytics.build_within_memory(owner, memory_limit=None)
    assert calls == [TOO_SMALL, None]


def test_the_limit_grows_with_the_forms_the_build_parses() -> None:
    assert models_memory_limit(0) == MODELS_MEMORY_LIMIT
    assert models_memory_limit(100 * 2**20) == MODELS_MEMORY_LIMIT  # 35 MB of work: the floor
    # `large` with 1,000 syncs of history, built in full: 1.05 GB of forms (needs 320 MB)
    assert models_memory_limit(1_046_274_518) == "350MB"
    # ... and built incrementally: few forms, but 5.7 million history rows (needs 240 MB)
    assert models_memory_limit(100 * 2**20, 1_400_000) == MODELS_MEMORY_LIMIT
    assert models_memory_limit(100 * 2**20, 5_721_936) == "262MB"


def test_a_build_parses_the_current_forms_and_those_since_the_watermark(tmp_path: Path) -> None:
    """What the limit is chosen from: an incremental build parses the current versions
    and those that started or ended after the history marts' watermark; a full build
    every version."""
    path = create_raw(tmp_path / "warehouse.duckdb")
    day = timedelta(days=1)
    old = [questionnaire("ns", f"c{i}", "t1", "x" * 1000, valid_from=SYNCED_AT - 9 * day,
                         valid_to=SYNCED_AT - 8 * day) for i in range(50)]
    recent = [questionnaire("ns", f"c{i}", "t1", "x" * 1000, valid_from=SYNCED_AT - 8 * day,
                            valid_to=SYNCED_AT) for i in range(10)]
    current = [questionnaire("ns", f"c{i}", "t1", "x" * 1000, valid_from=SYNCED_AT) for i in range(20)]
    insert(path, "questionnaires", old + recent + current)
    with duckdb.connect(str(path)) as con:
        assert form_bytes_to_read(con, in_full=True) == 80 * 1000
        assert form_bytes_to_read(con, in_full=False) == 80 * 1000  # no watermark yet: everything
        con.execute("create schema staging")
        con.execute(f"create table {STATE_TABLE} (relation varchar, fingerprint varchar, "
                    "watermarks varchar, built_at timestamptz)")
        watermark = (SYNCED_AT - 5 * day).strftime("%Y-%m-%d %H:%M:%S.%f+00")
        con.execute(f"insert into {STATE_TABLE} values ('answer_history__build', 'f', "
                    f"'{{\"ns\": \"{watermark}\"}}', now())")
        assert form_bytes_to_read(con, in_full=False) == 30 * 1000  # the current and those ended since
        assert form_bytes_to_read(con, in_full=True) == 80 * 1000


def test_a_build_reads_the_larger_of_each_history_table_and_its_spare() -> None:
    with duckdb.connect() as con:
        con.execute("create schema analytics")
        con.execute("create table analytics.answer_history as from range(100)")
        con.execute("create table analytics.answer_history__build as from range(120)")
        con.execute("create table analytics.changes as from range(10)")
        con.execute("create table analytics.answers as from range(1000)")  # not a history mart
        assert history_rows(con, ["answer_history", "changes", "document_history"]) == 130
        assert history_rows(con, []) == 0


def test_the_models_are_built_once_with_the_chosen_limit(
    raw: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    owner = _copy(raw, tmp_path)
    chosen: list[int] = []

    def sizing(form_bytes: int, history_rows: int) -> str:
        chosen.append(form_bytes)
        return models_memory_limit(form_bytes, history_rows)

    with caplog.at_level(logging.DEBUG, logger="diligence.analytics"):
        result = analytics.build_within_memory(owner, memory_limit=sizing, as_of=AS_OF)
    assert result.row_counts["analytics.questionnaire_completeness"] == 200
    assert len(chosen) == 1 and chosen[0] > 200 * 1000  # 200 forms of 30 fields
    assert "again" not in caplog.text
