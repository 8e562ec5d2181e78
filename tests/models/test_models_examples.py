"""The analysts' example queries (sql/examples/) run and answer their questions, and the
README links each of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from diligence.analytics.models import build_models

from .test_models_lifecycle import AS_OF, S2, S3, S4, make_lifecycle_raw

EXAMPLES = Path(__file__).resolve().parents[2] / "sql" / "examples"
README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = make_lifecycle_raw(tmp_path_factory.mktemp("examples") / "warehouse.duckdb")
    build_models(path, as_of=AS_OF)
    return path


def run_example(path: Path, name: str, company_id: str | None = None) -> list[dict[str, Any]]:
    sql = (EXAMPLES / f"{name}.sql").read_text(encoding="utf-8")
    with duckdb.connect(str(path), read_only=True) as con:
        if company_id is not None:
            con.execute("set variable company_id = ?", [company_id])
        result = con.execute(sql)
        names = [d[0] for d in result.description]
        return [dict(zip(names, row, strict=True)) for row in result.fetchall()]


def test_counterparty_answers_field_by_field(warehouse: Path) -> None:
    result = run_example(warehouse, "counterparty_answers", "c1")
    assert [(r["namespace_company_id"], r["field_label"], r["answer_text"]) for r in result] == [
        ("ns", "Legal name", "Acme AS"),
        ("ns", "Size", "Large"),
        ("ns", "Website", None),
        ("ns2", "Legal name", "Acme AS"),
        ("ns2", "Size", "Small"),
        ("ns2", "Website", None),
    ]
    size = result[1]
    assert (size["last_changed_at"], size["last_change_type"], size["previous_answer_text"]) == (
        S3,
        "changed",
        "Small",
    )
    assert (size["company_name"], size["confirmed_at"]) == ("Acme", S4)
    assert result[0]["last_changed_at"] is None
    everyone = run_example(warehouse, "counterparty_answers")
    assert {r["company_name"] for r in everyone} == {"Acme", "Cobalt"}  # never the own company


def test_counterparty_answer_changes(warehouse: Path) -> None:
    result = run_example(warehouse, "counterparty_answer_changes", "c3")
    assert [(r["changed_at"], r["field_label"], r["change_type"]) for r in result] == [
        (S4, "Legal name", "restored"),
        (S4, "Size", "restored"),
        (S2, "Legal name", "access_withdrawn"),
        (S2, "Size", "access_withdrawn"),
    ]
    assert result[-1]["old_answer_text"] == "Tiny" and result[-1]["new_answer_text"] is None
    disconnected = run_example(warehouse, "counterparty_answer_changes", "c2")
    assert {(r["company_name"], r["change_type"]) for r in disconnected} == {
        ("Bravo", "disconnected")
    }


def test_documents_expiring_per_counterparty(warehouse: Path) -> None:
    result = run_example(warehouse, "documents_expiring_per_counterparty")
    assert [
        (r["company_name"], r["document_id"], r["expiry_status"], r["namespaces"]) for r in result
    ] == [
        ("Acme", "d1", "expired", ["ns"]),
        ("Cobalt", "d3", "expiring", ["ns"]),
    ]
    assert result[0]["days_until_expiry"] < 0 <= result[1]["days_until_expiry"]


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.sql")))
def test_readme_links_the_example(name: str) -> None:
    assert f"](sql/examples/{name}.sql)" in README.read_text(encoding="utf-8")
