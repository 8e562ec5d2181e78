"""The change feed on the sandbox: its world edited between two syncs through the
sandbox's admin routes, each edit gives exactly its rows in analytics.changes; a first
sync and an unchanged sync give none. The digest, `diligence changes` and `status` read
the same rows."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from diligence.analytics import rebuild_analytics
from diligence.analytics.digest import read_digest
from diligence.warehouse import Warehouse
from sandbox.server import SandboxServer
from tests.helpers import TODAY, copy_warehouse, query, sync

pytestmark = pytest.mark.slow

Row = tuple[str, str, str | None, str | None, str | None, str | None, str | None, str | None]


def _admin(server: SandboxServer, route: str, body: dict[str, Any]) -> Any:
    response = httpx.post(f"{server.base_url}/_sandbox/{route}", json=body, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def _changes(warehouse: Path, sync_id: str) -> set[Row]:
    return set(query(
        warehouse,
        "select namespace_company_id, change_kind, company_id, company_type_id, field_id, document_id, "
        "old_value, new_value from analytics.changes where sync_id = ?",
        sync_id,
    ))


def _sync(server: SandboxServer, warehouse: Path, *, build: bool = True) -> str:
    """One sync, then (`build`) the models: they find every sync's changes at once."""
    result = sync(server, warehouse)
    assert not result.failed
    if build:
        assert not rebuild_analytics(warehouse).failed_checks
    return result.sync_id


@dataclass
class Feed:
    warehouse: Path
    syncs: list[str]
    expected: set[Row]


@pytest.fixture(scope="module")
def feed(tmp_path_factory: pytest.TempPathFactory, synced_small: Path) -> Iterator[Feed]:
    """Sync the small sandbox twice unchanged (the first is a copy of `synced_small`), edit
    it (answers, documents, connections, a template, a key of an endpoint), sync again,
    then once more unchanged."""
    warehouse = copy_warehouse(synced_small, tmp_path_factory.mktemp("feed") / "warehouse.duckdb")
    [(first,)] = query(warehouse, "select distinct sync_id from raw.sync_runs")
    with SandboxServer(scale="small", today=TODAY) as server:
        syncs = [first, _sync(server, warehouse)]
        expected = _edit(server, warehouse)  # reads the models of the unchanged world
        syncs += [_sync(server, warehouse, build=False), _sync(server, warehouse)]
    yield Feed(warehouse, syncs, expected)


def _readers(warehouse: Path, sql: str, *params: Any) -> list[str]:
    """The namespaces that read something, from the warehouse before the edits."""
    return sorted({row[0] for row in query(warehouse, sql, *params)})


def _edit(server: SandboxServer, warehouse: Path) -> set[Row]:
    """Edit the world; return the rows the next sync's changes must be."""
    expected: set[Row] = set()
    # two counterparties' questionnaires of one type: one answer revised, one removed
    (company, type_id, revised, old_text), (_c, _t, cleared, cleared_text) = query(
        warehouse,
        "select company_id, company_type_id, field_id, any_value(answer_text) from analytics.answers "
        "where not is_own_company and is_answered and field_type = 'Input' group by 1, 2, 3 "
        "qualify count(*) over (partition by company_id, company_type_id) >= 2 "
        "order by company_id, company_type_id, field_id limit 2")
    assert _c == company and _t == type_id
    _admin(server, "answers", {"company_id": company, "company_type_id": type_id, "field_id": revised,
                               "information": {"value": "Revised after the audit"}})
    _admin(server, "answers", {"company_id": company, "company_type_id": type_id, "field_id": cleared,
                               "information": None})
    for ns in _readers(warehouse, "select namespace_company_id from analytics.answers where company_id = ? "
                       "and company_type_id = ?", company, type_id):
        expected |= {(ns, "answer_changed", company, type_id, revised, None, old_text, "Revised after the audit"),
                     (ns, "answer_removed", company, type_id, cleared, None, cleared_text, None)}

    # documents of another counterparty: an expiry moved (still valid), one deleted, one added
    (doc_company, doc_type, moved, moved_from), (_dc, _dt, deleted, deleted_name) = query(
        warehouse,
        "select company_id, company_type_id, document_id, any_value(expiration_date_text) "
        "from analytics.document_expiry where not is_own_company and expiry_status = 'valid' "
        "and company_id <> ? and days_until_expiry > 60 group by 1, 2, 3 "
        "qualify count(*) over (partition by company_id, company_type_id) >= 2 order by 1, 2, 3 limit 2", company)
    assert (_dc, _dt) == (doc_company, doc_type)
    deleted_name = query(warehouse, "select any_value(document_name) from analytics.document_expiry "
                         "where document_id = ?", deleted)[0][0]
    _admin(server, "documents", {"document_id": moved, "set": {"expirationDate": "2031-06-30T00:00:00"}})
    _admin(server, "documents", {"document_id": deleted, "delete": True})
    added = _admin(server, "documents", {"add": {"company_id": doc_company, "company_type_id": doc_type,
                                                 "document": {"name": "SOC2_report_2026.pdf",
                                                              "expirationDate": "2031-01-01T00:00:00"}}})
    for ns in _readers(warehouse, "select namespace_company_id from analytics.document_expiry "
                       "where document_id = ?", moved):
        expected |= {
            (ns, "document_changed", doc_company, doc_type, None, moved,
             json.dumps({"expirationDate": moved_from}, separators=(",", ":")),
             '{"expirationDate":"2031-06-30T00:00:00"}'),
            (ns, "document_removed", doc_company, doc_type, None, deleted, deleted_name, None),
            (ns, "document_added", doc_company, doc_type, None, added["id"], None, "SOC2_report_2026.pdf"),
        }

    # a connection ends, another begins: one row each, whatever they carry
    ns, removed = query(
        warehouse,
        "select namespace_company_id, company_id from analytics.connections where company_id not in (?, ?) "
        "and is_detail_available order by 1, 2 limit 1", company, doc_company)[0]
    _admin(server, "connections", {"namespace": ns, "company_id": removed, "remove": True})
    old_rights = query(warehouse, "select to_json({'given': list_sort(given_company_type_ids), "
                       "'received': list_sort(received_company_type_ids)})::varchar from analytics.connections "
                       "where namespace_company_id = ? and company_id = ?", ns, removed)[0][0]
    expected.add((ns, "connection_removed", removed, None, None, None, old_rights, None))
    # a company another namespace reads, with documents and answers of the type: all
    # of them arrive with the connection, and none is a row of its own
    newcomer, received = query(
        warehouse,
        "select company_id, company_type_id from analytics.document_expiry "
        "where not is_own_company and company_id not in (select company_id from analytics.connections "
        "where namespace_company_id = ?) and (company_id, company_type_id) in "
        "(select (company_id, company_type_id) from analytics.answers where is_answered) "
        "group by all order by 1, 2 limit 1", ns)[0]
    _admin(server, "connections", {"namespace": ns, "company_id": newcomer, "received": [received], "given": []})
    expected.add((ns, "connection_added", newcomer, None, None, None, None,
                  json.dumps({"given": [], "received": [received]}, separators=(",", ":"))))

    # a question added to a template of a type nothing above touches, and one removed
    template_type, dropped, dropped_label = query(
        warehouse,
        "select company_type_id, field_id, any_value(field_label) from analytics.answers "
        "where company_type_id not in (?, ?, ?) and field_type <> 'Label' "
        "group by all order by 1, 2 limit 1", type_id, doc_type, received)[0]
    _admin(server, "templates", {"company_type_id": template_type,
                                 "add_field": {"id": "f-new-esg", "type": "Input",
                                               "label": "Do you publish an ESG report?"}})
    _admin(server, "templates", {"company_type_id": template_type, "remove_field": dropped})
    for ns_reading in _readers(warehouse, "select namespace_company_id from analytics.answers "
                               "where company_type_id = ?", template_type):
        expected |= {
            (ns_reading, "template_field_added", None, template_type, "f-new-esg", None, None,
             "Do you publish an ESG report?"),
            (ns_reading, "template_field_removed", None, template_type, dropped, None, dropped_label, None),
        }

    # the service starts sending a key on companies
    _admin(server, "keys", {"endpoint": "company", "key": "registeredAt", "value": "2019-04-01"})
    for ns_synced in _readers(warehouse, "select namespace_company_id from analytics.sync_runs"):
        expected.add((ns_synced, "service_key_added", None, None, "registeredAt", None, None, "company"))
    return expected


def test_first_and_unchanged_syncs_record_no_changes(feed: Feed) -> None:
    first, unchanged, _edited, again = feed.syncs
    assert _changes(feed.warehouse, first) == set()
    assert _changes(feed.warehouse, unchanged) == set()
    assert _changes(feed.warehouse, again) == set()


def test_each_edit_gives_exactly_its_rows(feed: Feed) -> None:
    assert _changes(feed.warehouse, feed.syncs[2]) == feed.expected
    # every row but a removal links the response that showed it
    missing = query(feed.warehouse, "select change_kind from analytics.changes where response_sha256 is null "
                    "and change_kind not in ('answer_removed', 'document_removed', 'connection_removed', "
                    "'template_field_removed', 'service_key_removed')")
    assert missing == []


def test_each_change_is_said_in_words(feed: Feed) -> None:
    """Labels and names where the ids are, values formatted: what the report and
    `diligence changes` show."""
    words = {(kind, item, old, new) for kind, item, old, new, own in query(
        feed.warehouse, "select change_kind, item_label, old_text, new_text, is_own_company "
                        "from analytics.changes where sync_id = ?", feed.syncs[2]) if not own}
    kinds = {kind for kind, *_ in words}
    assert kinds == {row[1] for row in feed.expected}
    labels = {field_id: label for field_id, label in query(
        feed.warehouse, "select field_id, any_value(field_label) from analytics.answer_history group by 1")}
    for kind, item, old, new in words:
        if kind.startswith("answer_"):
            assert item in labels.values() and not item.startswith("fld-")
        if kind == "document_changed":
            assert new == "expiration date: 2031-06-30", new
            assert old is not None and old.startswith("expiration date: ") and "T00:00:00" not in old
        if kind == "document_added":
            assert (item, new) == ("SOC2_report_2026.pdf", "SOC2_report_2026.pdf")
        if kind == "connection_added":
            assert item is None and new.startswith("given: none; received: ")
        if kind == "template_field_added":
            assert item == new == "Do you publish an ESG report?"
        if kind == "service_key_added":
            assert (item, new) == ("registeredAt", "company")
    # no JSON reaches the words
    assert not [w for w in words if any(text and text.startswith(("{", "[")) for text in w[2:])]


def test_the_digest_knows_the_kinds_the_model_accepts() -> None:
    """The Python list of kinds (their order in a digest) is the model's accepted_values."""
    import yaml

    from diligence.analytics.dbt import PROJECT_DIR
    from diligence.analytics.digest import KINDS

    (model,) = yaml.safe_load((PROJECT_DIR / "models" / "marts" / "changes.yml").read_text())["models"]
    column = next(c for c in model["columns"] if c["name"] == "change_kind")
    (test,) = column["data_tests"]
    assert list(KINDS) == test["accepted_values"]["arguments"]["values"]


def test_service_keys_say_what_is_modelled(feed: Feed) -> None:
    keys = {(endpoint, path): (modelled, first, last) for endpoint, path, modelled, first, last in query(
        feed.warehouse, "select endpoint, key_path, is_modelled, first_sync_id, last_sync_id "
                        "from analytics.service_keys")}
    assert keys[("company", "registeredAt")] == (False, feed.syncs[2], feed.syncs[3])
    assert keys[("company", "name")] == (True, feed.syncs[0], feed.syncs[3])
    assert keys[("connection", "readingRights.received.companyTypeIds")][0] is True
    assert keys[("questionnaire", "questionnaires.forms[].fields[].information.value")][0] is True


def test_the_digest_cli_and_status_read_the_feed(feed: Feed) -> None:
    with Warehouse(feed.warehouse).session(read_only=True, memory_limit=None) as con:
        digest = read_digest(con, since=feed.syncs[1])
        last = read_digest(con)
        start = query(feed.warehouse, "select min(synced_at) from analytics.sync_runs")[0][0]
        first = read_digest(con, since=start.isoformat())
    assert len(digest.changes) == len(feed.expected) and not digest.first_sync
    assert last.changes == [] and "0 changes since the previous sync" in last.body()
    assert len(first.changes) == len(feed.expected)
    body = digest.body()
    assert "- answer changed: " in body and "-> Revised after the audit" in body
    assert "- connection removed" in body and "- service key added: company registeredAt" in body

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "diligence", *args, "--warehouse", str(feed.warehouse)],
                              capture_output=True, text=True, timeout=120)

    listed = cli("changes", "--since", feed.syncs[1], "--kind", "answer_changed,answer_removed", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert {row["change_kind"] for row in rows} == {"answer_changed", "answer_removed"}
    assert len(rows) == sum(1 for row in feed.expected if row[1].startswith("answer_"))
    wrong = cli("changes", "--kind", "answer_moved")
    assert wrong.returncode == 2 and "answer_moved: no such change kind" in wrong.stderr
    status = cli("status", "--json")
    assert json.loads(status.stdout)["changes"] == {"sync_id": feed.syncs[3], "total": 0, "counts": {}}


def test_keys_the_service_sends_that_nothing_models(tmp_path: Path) -> None:
    """The sandbox with drift sends properties the spec does not show: each is one
    unmodelled row of analytics.service_keys, the modelled ones are marked so."""
    warehouse = tmp_path / "warehouse.duckdb"
    with SandboxServer(scale="small", drift=True) as server:
        sync_id = _sync(server, warehouse)
    unmodelled = set(query(warehouse, "select endpoint, key_path from analytics.service_keys "
                                      "where not is_modelled and first_sync_id = ?", sync_id))
    assert {("company", "website"), ("company", "foundedYear"), ("company", "tags"),
            ("documents", "sizeBytes"), ("documents", "mimeType"), ("connections", "status"),
            ("connection", "connectedSince"),
            ("questionnaire", "questionnaires.forms[].fields[].required"),
            ("template", "questionnaires.forms[].fields[].validation.maxLength")} <= unmodelled
    modelled = set(query(warehouse, "select endpoint, key_path from analytics.service_keys where is_modelled"))
    assert {("company", "lei"), ("documents", "expirationDate"),
            ("questionnaire", "questionnaires.forms[].fields[].information.value")} <= modelled
    assert not unmodelled & modelled
