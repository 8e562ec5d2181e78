"""The history marts built incrementally equal a build from scratch (`--full-refresh`),
table for table, in the warehouse and in the analysts' copy.

One history of two namespaces, built after each step the way a daily schedule would:
answers changed, cleared and removed; a document's expiry changed; a failed sync; a
company renamed; reading rights withdrawn (403) and given back; a template that gains a
field; a connection removed; a namespace synced after a gap, and a sync committed after
a build of the other namespace with an earlier snapshot time (a late sync). The expiry
window changes between two builds (only `changes` reads it: it is built anew then).
"""

from __future__ import annotations

import re
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import pytest

from diligence.analytics import rebuild_analytics
from diligence.analytics.dbt import artifacts_dir, location_of
from diligence.analytics.models import ModelsResult
from diligence.warehouse import published_path

from .helpers import rows, scalar
from .rawdb import (
    company,
    connection,
    create_raw,
    document,
    field,
    form,
    insert,
    questionnaire,
    sync_run,
)

S1, S2, S3, S4, S5 = (datetime(2026, 1, 1, 6, 0, tzinfo=UTC) + timedelta(days=d) for d in range(5))
LATE = S4 - timedelta(hours=1)  # ns-b's sync after S3, committed after the build of ns-a's S4
AS_OF = S5 + timedelta(days=1)
A, B = "ns-a", "ns-b"
HISTORY = ("answer_history", "answer_changes", "document_history", "connection_history", "changes")


def forms(**answers: str | None) -> list[dict[str, Any]]:
    return [form("f1", "General", field("h", "Label", "General"), *(
        field(name, "Input", name.title(), None if value is None else {"value": value})
        for name, value in answers.items()))]


def template(*fields: str) -> dict[str, Any]:
    return {"namespace_company_id": A, "company_type_id": "t1",
            "forms_json": '[{"id": "f1", "label": "General", "fields": ['
            + ", ".join(f'{{"id": "{f}", "type": "Input", "label": "{f.title()}"}}' for f in fields) + "]}]"}


def retire(path: Path, table: str, at: datetime, where: str) -> None:
    """End the current versions of `table` matching `where` at the sync `at` (dlt scd2)."""
    with duckdb.connect(str(path)) as con:
        con.execute(f"update raw.{table} set _dlt_valid_to = ? where _dlt_valid_to is null and {where}", [at])


def sync_a_and_b(path: Path) -> None:
    """S1 and S2: both namespaces; ns-a's c1 changes its answers and a document at S2."""
    create_raw(path)
    with duckdb.connect(str(path)) as con:  # templates are scd2 too in this raw layer
        con.execute("alter table raw.questionnaire_templates add column _dlt_valid_from timestamptz")
        con.execute("alter table raw.questionnaire_templates add column _dlt_valid_to timestamptz")
    insert(path, "companies", [company(A, A, "Alpha", valid_from=S1), company(B, B, "Bravo", valid_from=S1),
                               company(A, "c1", "Acme", valid_from=S1), company(B, "c1", "Acme", valid_from=S1),
                               company(A, "c2", "Cargo", valid_from=S1)])
    insert(path, "connections", [connection(A, "c1", "Acme", received=["t1"], valid_from=S1),
                                 connection(A, "c2", "Cargo", received=["t1", "t2"], valid_from=S1),
                                 connection(B, "c1", "Acme", received=["t1"], valid_from=S1)])
    insert(path, "questionnaires", [
        questionnaire(A, "c1", "t1", forms(name="Acme AS", size="Small", city="Oslo"), valid_from=S1, valid_to=S2),
        questionnaire(A, "c1", "t1", forms(name="Acme AS", size="Large", city="Oslo"), valid_from=S2),
        questionnaire(A, "c2", "t1", forms(name="Cargo", size="Small"), valid_from=S1),
        questionnaire(A, "c2", "t2", forms(rating="5"), valid_from=S1),
        questionnaire(B, "c1", "t1", forms(name="Acme AS", size="Small"), valid_from=S1),
    ])
    insert(path, "documents", [
        document(A, "c1", "t1", "d1", "2026-01-20T00:00:00", valid_from=S1, valid_to=S2),
        document(A, "c1", "t1", "d1", "2026-02-20T00:00:00", valid_from=S2),
        document(A, "c2", "t2", "d2", "2026-01-04T00:00:00", valid_from=S1),
        document(B, "c1", "t1", "d3", None, valid_from=S1),
    ])
    insert(path, "questionnaire_templates", [{**template("name", "size"), "synced_at": S1, "_dlt_valid_from": S1}])
    insert(path, "sync_runs", [sync_run("s1", A, S1), sync_run("s1", B, S1), sync_run("s2", A, S2),
                               sync_run("s2", B, S2)])


def sync_3(path: Path) -> None:
    """S3: ns-a's sync fails; ns-b renames c1."""
    insert(path, "sync_runs", [sync_run("s3", A, S3, "failed", "service unavailable"), sync_run("s3", B, S3)])
    retire(path, "companies", S3, f"namespace_company_id = '{B}' and company_id = 'c1'")
    insert(path, "companies", [company(B, "c1", "Acme Holding", valid_from=S3)])


def sync_4(path: Path) -> None:
    """S4, ns-a only (ns-b not synced: a gap): c2's rights on t2 withdrawn (403), the
    template gains a field, c1 clears an answer."""
    insert(path, "sync_runs", [sync_run("s4", A, S4)])
    retire(path, "connections", S4, "company_id = 'c2'")
    insert(path, "connections", [connection(A, "c2", "Cargo", received=["t1"], valid_from=S4)])
    retire(path, "questionnaires", S4, "company_id = 'c2' and company_type_id = 't2'")
    retire(path, "documents", S4, "company_id = 'c2' and company_type_id = 't2'")
    insert(path, "sync_issues", [{"sync_id": "s4", "namespace_company_id": A, "endpoint": "questionnaire",
                                  "company_id": "c2", "company_type_id": "t2", "http_status": 403,
                                  "message": "Forbidden", "synced_at": S4}])
    retire(path, "questionnaire_templates", S4, "true")
    insert(path, "questionnaire_templates", [{**template("name", "size", "city"), "synced_at": S4,
                                              "_dlt_valid_from": S4}])
    retire(path, "questionnaires", S4, f"namespace_company_id = '{A}' and company_id = 'c1'")
    insert(path, "questionnaires", [
        questionnaire(A, "c1", "t1", forms(name="Acme AS", size="Large", city=None), valid_from=S4)])


def sync_5_and_late(path: Path) -> None:
    """ns-b's late sync (before S4, committed now): c1's answer and a new document; then
    S5 of ns-a: c1 disconnected, c2's rights on t2 given back, c2 renamed."""
    insert(path, "sync_runs", [sync_run("s4b", B, LATE), sync_run("s5", A, S5)])
    retire(path, "questionnaires", LATE, f"namespace_company_id = '{B}'")
    insert(path, "questionnaires", [questionnaire(B, "c1", "t1", forms(name="Acme AS", size="Large"),
                                                  valid_from=LATE)])
    insert(path, "documents", [document(B, "c1", "t1", "d4", "2026-01-06T00:00:00", valid_from=LATE)])
    for table in ("connections", "companies", "questionnaires", "documents"):
        retire(path, table, S5, f"namespace_company_id = '{A}' and company_id = 'c1'")
    retire(path, "connections", S5, "company_id = 'c2'")
    retire(path, "companies", S5, "company_id = 'c2'")
    insert(path, "connections", [connection(A, "c2", "Cargo", received=["t1", "t2"], valid_from=S5)])
    insert(path, "companies", [company(A, "c2", "Cargo Group", valid_from=S5)])
    insert(path, "questionnaires", [questionnaire(A, "c2", "t2", forms(rating="4"), valid_from=S5)])
    insert(path, "documents", [document(A, "c2", "t2", "d2", "2026-01-04T00:00:00", valid_from=S5)])


def build(path: Path, **options: Any) -> ModelsResult:
    result = rebuild_analytics(path, as_of=AS_OF, **options)
    assert [c.name for c in result.failed_checks] == []
    return result.models


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The warehouse built after every step (the last two builds extend their tables),
    a copy of it at the second build, and a copy of the end built with full_refresh."""
    root = tmp_path_factory.mktemp("incremental")
    path = root / "warehouse.duckdb"
    sync_a_and_b(path)
    built = {"first": build(path)}
    sync_3(path)
    built["second"] = build(path)  # the first build's tables are now its spares
    second = root / "second" / "warehouse.duckdb"
    second.parent.mkdir()
    for source in (path, published_path(path)):
        shutil.copy2(source, second.with_name(source.name))
    sync_4(path)
    built["third"] = build(path, expiring_within_days=60)
    sync_5_and_late(path)
    built["fourth"] = build(path)
    full = root / "full" / "warehouse.duckdb"
    full.parent.mkdir()
    shutil.copy2(path, full)
    built["full"] = build(full, full_refresh=True)
    return {"path": path, "full": full, "second": second, "built": built}


def differences(left: Path, right: Path) -> dict[str, tuple[int, int]]:
    """Per table of `analytics` (its spares left out), the rows only in `left` and only
    in `right` (as multisets; the build's own clock, evaluated_at, left out)."""
    con = duckdb.connect()
    con.execute(f"attach '{left}' as l (read_only)")
    con.execute(f"attach '{right}' as r (read_only)")
    tables = {db: [t for (t,) in con.execute(
        "select table_name from duckdb_tables() where database_name = ? and schema_name = 'analytics' "
        "and not ends_with(table_name, '__build') order by 1", [db]).fetchall()] for db in ("l", "r")}
    assert tables["l"] == tables["r"] and len(tables["l"]) >= 15
    found = {}
    for table in tables["l"]:
        columns = ", ".join(f'"{c}"' for (c,) in con.execute(
            "select column_name from duckdb_columns() where database_name = 'l' and schema_name = 'analytics' "
            "and table_name = ? and column_name <> 'evaluated_at' order by column_index", [table]).fetchall())
        counts = [con.execute(f"select count(*) from (select {columns} from {a}.analytics.{table} "
                              f"except all select {columns} from {b}.analytics.{table})").fetchone()[0]
                  for a, b in (("l", "r"), ("r", "l"))]
        if any(counts):
            found[table] = (counts[0], counts[1])
    con.close()
    return found


def test_incremental_builds_equal_a_full_refresh(history: dict[str, Any]) -> None:
    built = history["built"]
    assert built["first"].built_in_full == built["second"].built_in_full == sorted(HISTORY)
    # the expiry window changed: only `changes` reads it; then every table was extended
    assert built["third"].built_in_full == ["changes"]
    assert built["fourth"].built_in_full == []
    assert built["full"].built_in_full == sorted(HISTORY)
    assert differences(history["path"], history["full"]) == {}
    assert differences(published_path(history["path"]), published_path(history["full"])) == {}
    # the history this covers (so that the equality above is about something)
    kinds = {r["change_kind"] for r in rows(history["path"], "select distinct change_kind from analytics.changes")}
    assert {"answer_changed", "answer_removed", "reading_rights_changed", "template_field_added",
            "connection_removed", "company_changed", "document_added"} <= kinds
    endings = {r["change_type"] for r in rows(history["path"], "select change_type from analytics.answer_changes")}
    assert {"changed", "cleared", "access_withdrawn", "restored", "disconnected"} <= endings
    assert rows(history["path"], "select distinct company_name from analytics.answer_changes "
                "where namespace_company_id = 'ns-a' and company_id = 'c2'") == [{"company_name": "Cargo Group"}]
    late = {r["change_kind"] for r in rows(
        history["path"], "select change_kind from analytics.changes where detected_at = ?", [LATE])}
    assert {"answer_changed", "document_added"} <= late  # ns-b's sync, after ns-a's S4 was built


def test_a_raw_schema_change_between_builds_stays_exact(history: dict[str, Any], tmp_path: Path) -> None:
    """dlt adds columns as the service sends new properties: a declared column that did
    not exist (response_sha256) and one nobody declared, between two builds."""
    path = tmp_path / "warehouse.duckdb"
    for source in (history["second"], published_path(history["second"])):
        shutil.copy2(source, path.with_name(source.name))
    with duckdb.connect(str(path)) as con:
        for table in ("questionnaires", "documents"):
            con.execute(f"alter table raw.{table} add column response_sha256 varchar")
            con.execute(f"alter table raw.{table} add column extra_property varchar")
    sync_4(path)
    with duckdb.connect(str(path)) as con:
        con.execute("update raw.questionnaires set response_sha256 = 'f00d', extra_property = 'x' "
                    "where _dlt_valid_from = ?", [S4])
    extended = rebuild_analytics(path, as_of=AS_OF)
    assert extended.models.built_in_full == [] and not extended.failed_checks
    full = tmp_path / "full" / "warehouse.duckdb"
    full.parent.mkdir()
    shutil.copy2(path, full)
    rebuild_analytics(full, as_of=AS_OF, full_refresh=True)
    assert differences(path, full) == {}
    assert scalar(path, "select count(*) from analytics.answer_history where response_sha256 = 'f00d'") > 0


def test_access_ends_are_only_real_ends(history: dict[str, Any]) -> None:
    """A version replaced by a newer one at a sync is no access end; a questionnaire or
    document that left the current state is one, with its reason."""
    ends = rows(history["path"], "select namespace_company_id, company_id, company_type_id, ended_at, end_reason "
                "from staging.stg_access_ends order by ended_at, company_id")
    assert [(e["company_id"], e["company_type_id"], e["ended_at"], e["end_reason"]) for e in ends] == [
        ("c2", "t2", S4, "access_withdrawn"),
        ("c1", "t1", S5, "disconnected"),
    ]


def test_the_joins_of_the_history_marts_are_hash_joins(history: dict[str, Any]) -> None:
    """The plans DuckDB makes for answer_changes and stg_access_ends (as the last build
    compiled them) join on equality: no nested-loop join, whose cost grows with the
    square of the history."""
    compiled = artifacts_dir(location_of(history["path"])) / "compiled" / "diligence" / "models"
    con = duckdb.connect(str(history["path"]), read_only=True)
    try:
        for model in ("staging/stg_access_ends.sql", "marts/answer_changes.sql", "marts/document_history.sql"):
            sql = (compiled / model).read_text()
            sql = re.sub(r'"warehouse"\.', "", sql)  # the build's catalog is this file
            plan = con.execute("explain (analyze, format json) " + sql).fetchall()[0][1]
            operators = set(re.findall(r'"operator_name":\s*"([^"]+)"', plan))
            assert "HASH_JOIN" in operators, model
            assert not operators & {"NESTED_LOOP_JOIN", "BLOCKWISE_NL_JOIN", "PIECEWISE_MERGE_JOIN",
                                    "CROSS_PRODUCT"}, (model, operators)
    finally:
        con.close()
