"""COMMENT ON every analytics table and column: the descriptions of the dbt project's YAML,
persisted by dbt (persist_docs) and carried through the swap into analytics."""

from __future__ import annotations

from pathlib import Path

import duckdb
import yaml

from diligence.analytics.dbt import PROJECT_DIR
from diligence.analytics.models import build_models, copy_comments

from .helpers import rows
from .rawdb import AS_OF, connection, create_raw, field, form, insert, questionnaire


def described(layer: str) -> dict[str, dict]:
    """The models declared in the YAML files of models/<layer>/, by name."""
    models = {}
    for path in (PROJECT_DIR / "models" / layer).glob("*.yml"):
        for model in (yaml.safe_load(path.read_text()) or {}).get("models", []):
            models[model["name"]] = model | {"file": path.name}
    return models


def mart_names() -> set[str]:
    return set(described("marts"))


def test_every_model_has_its_own_yaml_file_describing_it() -> None:
    for layer in ("staging", "marts"):
        models = described(layer)
        assert set(models) == {path.stem for path in (PROJECT_DIR / "models" / layer).glob("*.sql")}
        for name, model in models.items():
            assert model["file"] == f"{name}.yml"
            assert "Grain" in model["description"] and "Key" in model["description"], name
            assert model["columns"] and all(column.get("description") for column in model["columns"]), name


def test_the_staging_yaml_lists_each_views_columns(clean_warehouse: Path) -> None:
    views = {}
    # every relation of `staging` but the incremental models' state (a table of the build's)
    for row in rows(clean_warehouse, "select table_name, column_name from duckdb_columns() "
                                      "where schema_name = 'staging' and table_name <> 'incremental_state' "
                                      "order by column_index"):
        views.setdefault(row["table_name"], []).append(row["column_name"])
    models = described("staging")
    assert {name: [c["name"] for c in model["columns"]] for name, model in models.items()} == views


def test_every_analytics_table_and_column_has_a_comment(tmp_path: Path) -> None:
    path = create_raw(tmp_path / "warehouse.duckdb")
    insert(path, "connections", [connection("ns", "c1", "Acme", received=["t1"])])
    fields = [field("q1", "Input", "Owner's name", {"value": "x"}), field("q2", "Input", None)]
    insert(path, "questionnaires", [questionnaire("ns", "c1", "t1", [form("f", "F", *fields)])])
    build_models(path, as_of=AS_OF)
    tables = rows(
        path,
        "select table_name, comment from duckdb_tables() where schema_name = 'analytics' "
        "union all select view_name, comment from duckdb_views() where schema_name = 'analytics'",
    )
    marts = mart_names()
    assert {t["table_name"] for t in tables} == marts
    assert [t["table_name"] for t in tables if not t["comment"]] == []
    columns = rows(
        path,
        "select table_name, column_name, comment from duckdb_columns() "
        "where schema_name = 'analytics'",
    )
    assert [(c["table_name"], c["column_name"]) for c in columns if not c["comment"]] == []
    by_column = {(c["table_name"], c["column_name"]): c["comment"] for c in columns}
    assert by_column[("answers_wide", "owner_s_name")] == "answer_text of field q1 (Owner's name)"
    assert by_column[("answers_wide", "field_q2")] == "answer_text of field q2 (no label)"
    # a column's description is its mart's own
    assert by_column[("answer_history", "synced_at")].startswith("synced_at of the sync that first")
    assert by_column[("answers", "synced_at")].startswith("The last sync that confirmed the row")
    assert "Grain" in {t["table_name"]: t["comment"] for t in tables}["counterparties"]


def test_copy_comments_into_another_database(clean_warehouse: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy.duckdb"
    with duckdb.connect() as con:
        con.execute(f"attach '{clean_warehouse}' as source (read_only)")
        con.execute(f"attach '{copy}' as published")
        con.execute("create schema published.analytics")
        con.execute("create table published.analytics.answers as from source.analytics.answers")
        written = copy_comments(con, "source", "published")
        expected = con.execute(
            "select count(*) from duckdb_columns() where database_name = 'source' "
            "and schema_name = 'analytics' and table_name = 'answers'"
        ).fetchone()[0]
        assert written == expected + 1  # the table and each of its columns
    comments = rows(
        copy,
        "select column_name, comment from duckdb_columns() where schema_name = 'analytics'",
    )
    assert all(c["comment"] for c in comments)
    [table] = rows(copy, "select comment from duckdb_tables() where schema_name = 'analytics'")
    assert table["comment"].startswith("Grain: one row per answerable")
