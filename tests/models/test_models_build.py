"""The dbt build: order, the swap into analytics, missing raw tables, failures; and the
smaller marts."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from diligence.analytics.models import ModelsResult, build_models
from diligence.errors import ModelError

from .helpers import by, rows, scalar
from .rawdb import (
    AS_OF,
    company,
    connection,
    create_raw,
    field,
    form,
    insert,
    questionnaire,
)

NS = "ns"
ANALYTICS_TABLES = {
    "answers",
    "questionnaire_completeness",
    "document_expiry",
    "connections",
    "sync_issues",
    "answer_changes",
    "reading_rights",
    "answers_wide",
    "answer_history",
    "answers_wide_columns",
    "counterparties",
    "connection_history",
    "document_history",
    "sync_runs",
    "namespaces",
    "freshness",
    "headline",
    "changes",
    "service_keys",
}
#: the analytics relations that are views (computed when read): none left as `<name>__build`
ANALYTICS_VIEWS = {"freshness"}


def test_result_reports_timings_in_dependency_order_and_row_counts(
    clean_build: tuple[Path, ModelsResult], clean_warehouse: Path
) -> None:
    result = clean_build[1]  # the build of the warehouse clean_warehouse copies
    names = list(result.timings)
    assert names.index("staging.stg_questionnaire_versions") < names.index(
        "staging.stg_questionnaire_field_versions"
    )
    assert names.index("analytics.answer_history") < names.index("analytics.answers")
    assert names.index("analytics.answers") < names.index("analytics.answers_wide")
    assert {n.split(".")[1] for n in names if n.startswith("analytics.")} == ANALYTICS_TABLES
    assert set(result.row_counts) == {f"analytics.{t}" for t in ANALYTICS_TABLES}
    assert result.row_counts["analytics.answers"] == scalar(
        clean_warehouse, "select count(*) from analytics.answers"
    )
    assert result.row_counts["analytics.answers"] == 6
    assert result.seconds > 0
    # the build's tables were renamed over the published ones, its views made again over
    # them: none is left beside them
    tables = {r["table_name"] for r in rows(
        clean_warehouse, "select table_name from duckdb_tables() where schema_name = 'analytics'")}
    views = {r["view_name"] for r in rows(
        clean_warehouse, "select view_name from duckdb_views() where schema_name = 'analytics'")}
    assert (tables, views) == (ANALYTICS_TABLES - ANALYTICS_VIEWS, ANALYTICS_VIEWS)


def test_builds_on_an_empty_warehouse(empty_build: tuple[Path, ModelsResult]) -> None:
    path, result = empty_build
    counts = dict(result.row_counts)
    headline = counts.pop("analytics.headline")
    assert (set(counts.values()), headline) == ({0}, 1)  # headline: always one row
    columns = rows(
        path,
        "select column_name from information_schema.columns "
        "where table_schema = 'analytics' and table_name = 'answers'",
    )
    assert "selected_option_ids" in {c["column_name"] for c in columns}


def test_builds_with_missing_raw_tables_and_columns(tmp_path: Path) -> None:
    """Three raw tables, the others missing (dlt creates a table once a namespace has rows
    for it), two of the three without their optional columns (dlt creates a column once
    it has seen a non-null value): each missing table reads as an empty relation and each
    missing column as NULL (the `raw_source` macro, table by table, is all that reads
    raw). Every table present is clean_build's; none at all, empty_build's."""
    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("create schema raw")
        con.execute(
            "create table raw.companies (namespace_company_id VARCHAR, "
            "company_id VARCHAR, name VARCHAR, synced_at TIMESTAMPTZ)"
        )
        con.execute("insert into raw.companies values ('ns', 'c1', 'Acme', now())")
        # the optional columns are missing; the keys are there (a missing key is a
        # contract's NOT NULL failure, naming the model)
        con.execute(
            "create table raw.connections (namespace_company_id VARCHAR, "
            "company_id VARCHAR, name VARCHAR, given_company_type_ids VARCHAR, synced_at TIMESTAMPTZ)"
        )
        con.execute("""insert into raw.connections values ('ns', 'c1', 'Acme', '["t1"]', now())""")
    create_raw(path, tables=["questionnaires"])
    insert(
        path,
        "questionnaires",
        [questionnaire(NS, "c1", "t1", [form("f", "F", field("a", "Input", "A", {"value": "1"}))])],
    )
    result = build_models(path, as_of=AS_OF)
    assert result.row_counts["analytics.answers"] == 1
    assert scalar(path, "select count(*) from staging.stg_questionnaire_template_versions") == 0
    [row] = rows(path, "select * from analytics.connections")
    assert (row["company_name"], row["lei"], row["cin"], row["country"]) == ("Acme", None, None, None)
    assert row["given_company_type_ids"] == ["t1"]
    assert row["received_company_type_ids"] == []


def test_failing_model_raises_and_keeps_previous_build(clean_warehouse: Path) -> None:
    before = scalar(clean_warehouse, "select count(*) from analytics.answers")
    insert(clean_warehouse, "questionnaires", [questionnaire(NS, "c9", "t9", "{not json")])
    with pytest.raises(ModelError) as raised:
        build_models(clean_warehouse, as_of=AS_OF)
    error = raised.value
    assert error.model_name == "analytics.answer_history"
    assert "json" in error.duckdb_message.lower()
    assert "analytics.answer_history" in str(error) and error.duckdb_message in str(error)
    # rolled back: the previous build is intact, staging included
    assert scalar(clean_warehouse, "select count(*) from analytics.answers") == before
    assert scalar(clean_warehouse, "select count(*) from analytics.answers_wide") == 3
    assert scalar(clean_warehouse, "select count(*) from staging.stg_connections") == 2


def test_connections_join_company_details(clean_warehouse: Path) -> None:
    result = by("company_id", rows(clean_warehouse, "select * from analytics.connections"))
    assert set(result) == {"c1", "c2"}
    acme = result["c1"]
    assert (acme["company_name"], acme["city"], acme["lei"]) == ("Acme", "Oslo", "LEI1")
    assert (acme["given_company_type_ids"], acme["received_company_type_ids"]) == (
        ["t1", "t2"],
        ["t1"],
    )
    bravo = result["c2"]
    assert (bravo["company_name"], bravo["city"], bravo["is_detail_available"]) == ("Bravo", None, False)
    assert bravo["given_company_type_ids"] == []


# -- three scenarios in tables of their own (connections; sync runs and issues;
# questionnaires), built together once ------------------------------------------------
def _reading_rights_raw(path: Path) -> None:
    insert(
        path,
        "connections",
        [
            connection(NS, "c1", "Acme", given=["t1", "t2", "t2"], received=["t2"]),
            connection(NS, "c2", "Bravo", has_detail=False),
        ],
    )


def _sync_issues_raw(path: Path) -> None:
    def run(sync_id: str, ns: str, day: int) -> dict:
        at = AS_OF.replace(day=day)
        return {
            "sync_id": sync_id,
            "namespace_company_id": ns,
            "started_at": at,
            "finished_at": at,
            "status": "success",
        }

    def issue(sync_id: str, ns: str, day: int, company_id: str) -> dict:
        return {
            "sync_id": sync_id,
            "namespace_company_id": ns,
            "endpoint": "questionnaire",
            "company_id": company_id,
            "company_type_id": "t1",
            "http_status": 404,
            "message": "Not Found",
            "synced_at": AS_OF.replace(day=day),
        }

    insert(
        path,
        "sync_runs",
        [run("a1", "A", 1), run("a2", "A", 2), run("c1", "C", 1), run("c2", "C", 2)],
    )
    insert(
        path,
        "sync_issues",
        [
            issue("a1", "A", 1, "old"),
            issue("a2", "A", 2, "new"),
            issue("b1", "B", 1, "old"),
            issue("b2", "B", 2, "new"),
            issue("b2", "B", 2, "new2"),
            issue("c1", "C", 1, "old"),  # C's latest sync had no issue
        ],
    )


WIDE_LABELS = [
    "Company name",
    "Revenue (EUR)",
    "Revenue (EUR)",
    "revenue_eur_2",
    "Société Générale",
    "中文",
    None,
    "2024 turnover",
    "x" * 80,
    "x" * 80,
]


def _wide_labels_raw(path: Path) -> None:
    fields = [field(f"id{i}", "Input", label, {"value": "v"}) for i, label in enumerate(WIDE_LABELS)]
    insert(path, "questionnaires", [questionnaire(NS, "c1", "t1", [form("f", "F", *fields)])])


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three scenarios above in one raw layer, built once (read-only)."""
    path = create_raw(tmp_path_factory.mktemp("scenarios") / "warehouse.duckdb")
    for add in (_reading_rights_raw, _sync_issues_raw, _wide_labels_raw):
        add(path)
    build_models(path, as_of=AS_OF)
    return path


def test_reading_rights(scenarios: Path) -> None:
    result = rows(
        scenarios,
        "select company_id, company_type_id, direction from analytics.reading_rights order by all",
    )
    assert [tuple(r.values()) for r in result] == [
        ("c1", "t1", "given"),
        ("c1", "t2", "given"),
        ("c1", "t2", "received"),
    ]


def test_sync_issues_of_latest_sync_only(scenarios: Path) -> None:
    result = rows(
        scenarios,
        "select namespace_company_id, company_id, sync_id from analytics.sync_issues order by all",
    )
    assert [tuple(r.values()) for r in result] == [
        ("A", "new", "a2"),
        ("B", "new", "b2"),
        ("B", "new2", "b2"),
    ]


def test_wide_column_names(scenarios: Path) -> None:
    names = [
        r["column_name"]
        for r in rows(scenarios, "select column_name from analytics.answers_wide_columns order by column_position")
    ]
    assert names[:8] == [
        "company_name_2",
        "revenue_eur",
        "revenue_eur_2",
        "revenue_eur_2_2",
        "societe_generale",
        "field_id5",
        "field_id6",
        "field_2024_turnover",
    ]
    assert names[8] == "x" * 60 and names[9] == "x" * 58 + "_2"
    assert len(set(names)) == len(names)


def test_answers_wide(tmp_path: Path) -> None:
    path = create_raw(tmp_path / "warehouse.duckdb")
    insert(path, "companies", [company(NS, "c1", "Acme")])
    insert(path, "connections", [connection(NS, "c1", "Acme"), connection(NS, "c2", "Bravo")])
    forms_c1 = [
        form(
            "f1",
            "A",
            field("h", "Label", "Heading"),
            field("q1", "Input", "Revenue (EUR)", {"value": "10"}),
            field("q2", "Checkbox", "Markets", {"values": ["EU", "US"]}),
        ),
        form(
            "f2",
            "B",
            field("q3", "Input", "Revenue (EUR)", {"value": "20"}),
            field("q4", "Input", "Company ID"),
        ),
    ]
    insert(
        path,
        "questionnaires",
        [
            questionnaire(NS, "c1", "t1", forms_c1),
            questionnaire(
                NS,
                "c2",
                "t1",
                [form("f1", "A", field("q1", "Input", "Revenue (EUR)", {"value": "5"}))],
            ),
            questionnaire(NS, "c2", "t2", [form("f1", "A", field("h", "Label", "Only a label"))]),
        ],
    )
    build_models(path, as_of=AS_OF)
    wide = {
        (r["company_id"], r["company_type_id"]): r
        for r in rows(path, "select * from analytics.answers_wide")
    }
    assert list(wide[("c1", "t1")]) == [
        "namespace_company_id",
        "company_id",
        "company_name",
        "is_own_company",
        "company_type_id",
        "response_sha256",
        "revenue_eur",
        "markets",
        "revenue_eur_2",
        "company_id_2",
    ]
    assert wide[("c1", "t1")] == {
        "namespace_company_id": NS,
        "company_id": "c1",
        "company_name": "Acme",
        "is_own_company": False,
        "company_type_id": "t1",
        "response_sha256": None,  # loaded before evidence was kept
        "revenue_eur": "10",
        "markets": "EU; US",
        "revenue_eur_2": "20",
        "company_id_2": None,
    }
    assert wide[("c2", "t1")]["revenue_eur"] == "5"
    assert wide[("c2", "t2")]["revenue_eur"] is None
    mapping = rows(
        path,
        "select column_name, field_id from analytics.answers_wide_columns order by column_position",
    )
    assert [tuple(m.values()) for m in mapping] == [
        ("revenue_eur", "q1"),
        ("markets", "q2"),
        ("revenue_eur_2", "q3"),
        ("company_id_2", "q4"),
    ]


def test_answers_wide_without_answers(tmp_path: Path) -> None:
    path = create_raw(tmp_path / "warehouse.duckdb")
    insert(
        path,
        "questionnaires",
        [questionnaire(NS, NS, "t1", json.dumps([form("f", "F", field("h", "Label", "L"))]))],
    )
    build_models(path, as_of=AS_OF)
    assert rows(path, "select * from analytics.answers_wide") == [
        {
            "namespace_company_id": NS,
            "company_id": NS,
            "company_name": None,
            "is_own_company": True,
            "company_type_id": "t1",
            "response_sha256": None,
        }
    ]


def test_views_resolve_when_the_file_is_attached_under_another_name(clean_warehouse: Path) -> None:
    with duckdb.connect() as con:
        con.execute(f"attach '{clean_warehouse}' as elsewhere (read_only)")
        views = con.execute(
            "select schema_name, view_name from duckdb_views() "
            "where database_name = 'elsewhere' and not internal"
        ).fetchall()
        assert len(views) >= 16
        for schema, view in views:
            con.execute(f'select count(*) from elsewhere."{schema}"."{view}"').fetchall()
