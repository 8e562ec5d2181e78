"""Several syncs on the scd2 raw layer: each event reaches the history marts,
counterparties, answer_changes and freshness.

The story, two namespaces (`ns`, `ns2`) and five syncs S1..S5:
- c1 (Acme) is a connection of both namespaces throughout; at S3 one answer and one
  document of it change, and at S2 another document of it is no longer listed;
- c2 (Bravo) is removed from `ns` at S3 (its questionnaire and document go with it);
- c3 (Cobalt) withdraws the reading right on t1 at S2 (403 on its questionnaire and
  documents) and gives it back at S4;
- c4 (Delta) answers 404 for its questionnaire at S3;
- `ns`'s sync S5 fails, `ns2`'s succeeds.
"""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import diligence.analytics.publish as publish_module
from diligence.analytics.checks import run_checks
from diligence.analytics.models import build_models
from diligence.analytics.publish import publish_analytics
from diligence.warehouse import Warehouse

from .helpers import rows
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
AS_OF = S5 + timedelta(hours=12)
NS, NS2 = "ns", "ns2"


def forms(size: str, name: str = "Acme AS") -> list[dict]:
    return [
        form(
            "f1",
            "General",
            field("h", "Label", "Heading"),
            field("legal_name", "Input", "Legal name", {"value": name}),
            field("size", "Input", "Size", {"value": size}),
            field("blank", "Input", "Website"),
        )
    ]


def issue(sync_id: str, at: datetime, company_id: str, status: int, endpoint: str) -> dict:
    return {
        "sync_id": sync_id,
        "namespace_company_id": NS,
        "endpoint": endpoint,
        "company_id": company_id,
        "company_type_id": "t1",
        "http_status": status,
        "message": "Forbidden" if status == 403 else "Not Found",
        "synced_at": at,
    }


def make_lifecycle_raw(path: Path) -> Path:
    create_raw(path)
    insert(
        path,
        "companies",
        [
            company(NS, NS, "Self", valid_from=S1),
            company(NS2, NS2, "Self Two", valid_from=S1),
            company(NS, "c1", "Acme", valid_from=S1, lei="LEI-ACME"),
            company(NS2, "c1", "Acme", valid_from=S1, lei="LEI-ACME"),
            company(NS, "c2", "Bravo", valid_from=S1, valid_to=S3),
            company(NS, "c3", "Cobalt", valid_from=S1),
            company(NS, "c4", "Delta", valid_from=S1),
        ],
    )
    insert(
        path,
        "connections",
        [
            connection(NS, "c1", "Acme", received=["t1"], valid_from=S1),
            connection(NS2, "c1", "Acme", received=["t1"], valid_from=S1),
            connection(NS, "c2", "Bravo", received=["t1"], valid_from=S1, valid_to=S3),
            connection(NS, "c3", "Cobalt", received=["t1"], valid_from=S1, valid_to=S2),
            connection(NS, "c3", "Cobalt", received=[], valid_from=S2, valid_to=S4),
            connection(NS, "c3", "Cobalt", received=["t1"], valid_from=S4),
            connection(NS, "c4", "Delta", received=["t1"], valid_from=S1),
        ],
    )
    insert(
        path,
        "questionnaires",
        [
            questionnaire(NS, "c1", "t1", forms("Small"), valid_from=S1, valid_to=S3),
            questionnaire(NS, "c1", "t1", forms("Large"), valid_from=S3),
            questionnaire(NS2, "c1", "t1", forms("Small"), valid_from=S1),
            questionnaire(NS, "c2", "t1", forms("Small", "Bravo AS"), valid_from=S1, valid_to=S3),
            questionnaire(NS, "c3", "t1", forms("Tiny", "Cobalt AS"), valid_from=S1, valid_to=S2),
            questionnaire(NS, "c3", "t1", forms("Tiny", "Cobalt AS"), valid_from=S4),
            questionnaire(NS, "c4", "t1", forms("Huge", "Delta AS"), valid_from=S1, valid_to=S3),
            questionnaire(NS, NS, "t9", forms("Own", "Self AS"), valid_from=S1),
        ],
    )
    insert(
        path,
        "documents",
        [
            document(NS, "c1", "t1", "d1", "2026-06-01T00:00:00", valid_from=S1, valid_to=S3),
            document(NS, "c1", "t1", "d1", "2026-01-04T00:00:00", valid_from=S3),
            document(NS, "c1", "t1", "d-gone", "2027-01-01T00:00:00", valid_from=S1, valid_to=S2),
            document(NS, "c2", "t1", "d2", "2026-12-01T00:00:00", valid_from=S1, valid_to=S3),
            document(NS, "c3", "t1", "d3", "2026-01-20T00:00:00", valid_from=S1, valid_to=S2),
            document(NS, "c3", "t1", "d3", "2026-01-20T00:00:00", valid_from=S4),
        ],
    )
    runs = [sync_run(f"s{i}", NS, at) for i, at in enumerate((S1, S2, S3, S4), start=1)]
    runs.append(sync_run("s5", NS, S5, status="failed", error="service unavailable"))
    runs += [sync_run(f"s{i}", NS2, at) for i, at in enumerate((S1, S2, S3, S4, S5), start=1)]
    insert(path, "sync_runs", runs)
    insert(
        path,
        "sync_issues",
        [
            issue("s2", S2, "c3", 403, "questionnaire"),
            issue("s2", S2, "c3", 403, "documents"),
            issue("s3", S3, "c4", 404, "questionnaire"),
        ],
    )
    return path


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = make_lifecycle_raw(tmp_path_factory.mktemp("lifecycle") / "warehouse.duckdb")
    build_models(path, as_of=AS_OF)
    return path


def test_all_checks_pass(warehouse: Path) -> None:
    assert [r.name for r in run_checks(warehouse) if not r.passed] == []


def test_removed_connection_keeps_its_history(warehouse: Path) -> None:
    current = rows(
        warehouse, "select company_id from analytics.connections where namespace_company_id = 'ns'"
    )
    assert "c2" not in {r["company_id"] for r in current}
    [version] = rows(
        warehouse,
        "select * from analytics.connection_history where company_id = 'c2'",
    )
    assert (version["company_name"], version["valid_from"], version["valid_to"]) == ("Bravo", S1, S3)
    assert (version["is_current"], version["change_type"], version["end_reason"]) == (
        False,
        "connected",
        "disconnected",
    )


def test_withdrawn_and_restored_reading_right(warehouse: Path) -> None:
    versions = rows(
        warehouse,
        "select * from analytics.connection_history where company_id = 'c3' order by valid_from",
    )
    assert [
        (
            v["valid_from"],
            v["valid_to"],
            v["received_company_type_ids"],
            v["received_added"],
            v["received_withdrawn"],
            v["change_type"],
            v["end_reason"],
        )
        for v in versions
    ] == [
        (S1, S2, ["t1"], ["t1"], [], "connected", "changed"),
        (S2, S4, [], [], ["t1"], "changed", "changed"),
        (S4, None, ["t1"], ["t1"], [], "changed", None),
    ]


def test_counterparties(warehouse: Path) -> None:
    result = {r["company_id"]: r for r in rows(warehouse, "select * from analytics.counterparties")}
    assert set(result) == {"c1", "c2", "c3", "c4"}
    acme = result["c1"]
    assert (acme["company_name"], acme["lei"], acme["namespace_company_ids"]) == (
        "Acme",
        "LEI-ACME",
        ["ns", "ns2"],
    )
    assert (acme["is_connected"], acme["namespace_count"], acme["is_own_company"]) == (
        True,
        2,
        False,
    )
    # confirmed by ns2's sync S5 (ns's S5 failed)
    assert (acme["first_seen_at"], acme["last_seen_at"], acme["disconnected_at"]) == (S1, S5, None)
    bravo = result["c2"]
    assert (bravo["company_name"], bravo["is_connected"], bravo["namespace_company_ids"]) == (
        "Bravo",
        False,
        [],
    )
    # S2 was the last sync that still listed it; S3 no longer did
    assert (bravo["first_seen_at"], bravo["last_seen_at"], bravo["disconnected_at"]) == (
        S1,
        S2,
        S3,
    )
    assert result["c3"]["is_connected"] and result["c3"]["last_seen_at"] == S4


def test_document_history(warehouse: Path) -> None:
    history = {
        (r["company_id"], r["document_id"], r["version_number"]): r
        for r in rows(warehouse, "select * from analytics.document_history")
    }
    summary = {
        key: (r["valid_from"], r["valid_to"], r["change_type"], r["end_reason"])
        for key, r in history.items()
    }
    assert summary == {
        ("c1", "d1", 1): (S1, S3, "added", "changed"),
        ("c1", "d1", 2): (S3, None, "changed", None),
        ("c1", "d-gone", 1): (S1, S2, "added", "removed"),
        ("c2", "d2", 1): (S1, S3, "added", "disconnected"),
        ("c3", "d3", 1): (S1, S2, "added", "access_withdrawn"),
        ("c3", "d3", 2): (S4, None, "restored", None),
    }
    assert history[("c2", "d2", 1)]["company_name"] == "Bravo"
    assert history[("c1", "d1", 1)]["expiration_date"] == datetime(2026, 6, 1, tzinfo=UTC)
    current = rows(
        warehouse,
        "select company_id, document_id, expiry_status, versioned_at, synced_at "
        "from analytics.document_expiry order by all",
    )
    assert [(r["company_id"], r["document_id"], r["expiry_status"]) for r in current] == [
        ("c1", "d1", "expired"),
        ("c3", "d3", "expiring"),
    ]
    assert [(r["versioned_at"], r["synced_at"]) for r in current] == [(S3, S4), (S4, S4)]


def test_answer_changes(warehouse: Path) -> None:
    changes = rows(
        warehouse,
        "select * from analytics.answer_changes where namespace_company_id = 'ns' "
        "order by changed_at, company_id, field_id",
    )
    summary = [
        (
            c["changed_at"],
            c["company_id"],
            c["field_id"],
            c["old_answer_text"],
            c["new_answer_text"],
            c["change_type"],
        )
        for c in changes
    ]
    assert summary == [
        (S2, "c3", "legal_name", "Cobalt AS", None, "access_withdrawn"),
        (S2, "c3", "size", "Tiny", None, "access_withdrawn"),
        (S3, "c1", "size", "Small", "Large", "changed"),
        (S3, "c2", "legal_name", "Bravo AS", None, "disconnected"),
        (S3, "c2", "size", "Small", None, "disconnected"),
        (S3, "c4", "legal_name", "Delta AS", None, "not_found"),
        (S3, "c4", "size", "Huge", None, "not_found"),
        (S4, "c3", "legal_name", None, "Cobalt AS", "restored"),
        (S4, "c3", "size", None, "Tiny", "restored"),
    ]
    first = changes[0]
    assert (first["company_name"], first["form_label"], first["field_label"]) == (
        "Cobalt",
        "General",
        "Legal name",
    )
    assert {c["company_name"] for c in changes if c["company_id"] == "c2"} == {"Bravo"}
    assert not any(c["is_own_company"] for c in changes)


def test_current_tables_show_only_what_is_readable_now(warehouse: Path) -> None:
    current = rows(
        warehouse,
        "select distinct company_id from analytics.answers where namespace_company_id = 'ns' "
        "order by 1",
    )
    assert [r["company_id"] for r in current] == ["c1", "c3", "ns"]


def test_synced_at_is_last_confirmation_and_versioned_at_last_change(warehouse: Path) -> None:
    answers = rows(
        warehouse,
        "select namespace_company_id, company_id, field_id, is_own_company, versioned_at, "
        "synced_at from analytics.answers where field_id = 'size' order by all",
    )
    assert [
        (a["namespace_company_id"], a["company_id"], a["versioned_at"], a["synced_at"])
        for a in answers
    ] == [
        ("ns", "c1", S3, S4),  # changed at S3, confirmed by S4 (S5 failed)
        ("ns", "c3", S4, S4),
        ("ns", "ns", S1, S4),
        ("ns2", "c1", S1, S5),
    ]
    assert [a["is_own_company"] for a in answers] == [False, False, True, False]
    completeness = rows(
        warehouse,
        "select company_id, synced_at, versioned_at from analytics.questionnaire_completeness "
        "where namespace_company_id = 'ns' and company_id = 'c1'",
    )
    assert [(c["synced_at"], c["versioned_at"]) for c in completeness] == [(S4, S3)]
    connections = rows(
        warehouse,
        "select company_id, synced_at, versioned_at from analytics.connections "
        "where namespace_company_id = 'ns' order by 1",
    )
    assert [(c["company_id"], c["synced_at"], c["versioned_at"]) for c in connections] == [
        ("c1", S4, S1),
        ("c3", S4, S4),
        ("c4", S4, S1),
    ]


def test_freshness_after_several_syncs(warehouse: Path) -> None:
    result = {
        r["namespace_company_id"]: r for r in rows(warehouse, "select * from analytics.freshness")
    }
    ns = result[NS]
    assert (ns["namespace_name"], ns["last_sync_id"], ns["last_status"]) == ("Self", "s5", "failed")
    assert (ns["last_synced_at"], ns["last_success_at"], ns["last_failure_at"]) == (S5, S4, S5)
    assert (ns["successful_sync_count"], ns["failed_sync_count"]) == (4, 1)
    assert ns["last_error_message"] == "service unavailable"
    # a view: its clock is the reader's, whatever the build's as_of
    now = datetime.now(UTC)
    assert abs(ns["evaluated_at"] - now) < timedelta(minutes=1)
    assert ns["hours_since_last_success"] == pytest.approx((now - S4) / timedelta(hours=1), abs=0.02)
    ns2 = result[NS2]
    assert (ns2["last_status"], ns2["last_success_at"], ns2["last_failure_at"]) == (
        "success",
        S5,
        None,
    )
    assert ns2["hours_since_last_success"] == pytest.approx((now - S5) / timedelta(hours=1), abs=0.02)
    runs = rows(warehouse, "select count(*) as n from analytics.sync_runs")
    assert runs == [{"n": 10}]


def test_published_copy_carries_freshness(warehouse: Path, tmp_path: Path) -> None:
    own = tmp_path / "warehouse.duckdb"
    shutil.copyfile(warehouse, own)
    with Warehouse(own).session(memory_limit=None) as con:
        published = publish_analytics(own, con)
    freshness = rows(
        published,
        "select namespace_company_id, last_status, last_success_at from analytics.freshness "
        "order by 1",
    )
    assert [tuple(r.values()) for r in freshness] == [("ns", "failed", S4), ("ns2", "success", S5)]
    assert rows(published, "select count(*) as n from analytics.sync_runs") == [{"n": 10}]
    # the descriptions of tables and columns come along
    described = rows(
        published,
        "select count(*) as n from duckdb_columns() "
        "where schema_name = 'analytics' and table_name = 'freshness' and comment is null",
    )
    assert described == [{"n": 0}]
    assert rows(
        published,
        "select comment is not null as ok from duckdb_views() where view_name = 'freshness'",
    ) == [{"ok": True}]
    # the copy's freshness is a view over the copy's own tables, computed when read
    (hours,) = rows(published, "select max(hours_since_last_success) as h from analytics.freshness")
    assert hours["h"] == pytest.approx((datetime.now(UTC) - S4) / timedelta(hours=1), abs=0.02)


def test_a_publish_that_fails_midway_leaves_the_previous_copy_and_the_session_as_they_were(
    warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = tmp_path / "warehouse.duckdb"
    shutil.copyfile(warehouse, own)
    with Warehouse(own).session(memory_limit=None) as con:
        published = publish_analytics(own, con)
        before = published.read_bytes()

        def fail(*args: object, **kwargs: object) -> int:
            raise RuntimeError("disk full")  # after every table of the copy is written

        monkeypatch.setattr(publish_module, "copy_comments", fail)
        with pytest.raises(RuntimeError, match="disk full"):
            publish_analytics(own, con)
        assert published.read_bytes() == before
        # the session is usable: no transaction left open, the copy detached
        assert con.execute("select count(*) from duckdb_databases() where database_name = 'published'"
                           ).fetchone() == (0,)
        con.execute("create table main.after_the_failure as select 1 as x")
        monkeypatch.undo()
        assert publish_analytics(own, con) == published
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "warehouse-analytics.duckdb", "warehouse.duckdb"]


def test_end_reasons_on_the_older_raw_shape(tmp_path: Path) -> None:
    """Raw connections without scd2 columns (delete-insert, reloaded by every sync): a
    current connection counts as connected at every earlier sync, so what ended earlier
    is not mistaken for a disconnection."""
    path = create_raw(tmp_path / "warehouse.duckdb")
    row = connection(NS, "c1", "Acme", received=["t1", "t2"], valid_from=S3)
    row["_dlt_valid_from"] = None  # no history kept: loaded again by the last sync, S3
    insert(path, "connections", [row])
    insert(
        path,
        "questionnaires",
        [questionnaire(NS, "c1", "t1", forms("Small"), valid_from=S1, valid_to=S2)],
    )
    insert(
        path,
        "documents",
        [document(NS, "c1", "t2", "d1", None, valid_from=S1, valid_to=S2)],
    )
    insert(path, "sync_issues", [issue("s2", S2, "c1", 403, "questionnaire")])
    build_models(path, as_of=AS_OF)
    reasons = rows(path, "select distinct change_type from analytics.answer_changes")
    assert reasons == [{"change_type": "access_withdrawn"}]
    [history] = rows(path, "select end_reason from analytics.document_history")
    assert history == {"end_reason": "removed"}  # not "disconnected"
    [counterparty] = rows(path, "select is_connected from analytics.counterparties")
    assert counterparty == {"is_connected": True}
