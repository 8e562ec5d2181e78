"""The report's numbers against the warehouse, its change detection, and that it is
self-contained (nothing to fetch when opened)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import duckdb
import pytest

from diligence.errors import WarehouseNotReadyError
from diligence.report.data import ReportData, collect
from diligence.report.page import render_html
from diligence.steps import report_step
from diligence.warehouse import Warehouse
from tests.helpers import query

from .conftest import Synced, headline_totals


def collect_of(warehouse: Path) -> ReportData:
    """What the report of `warehouse` shows, read through a session as the report step does."""
    with Warehouse(warehouse).session(read_only=True, memory_limit=None) as con:
        return collect(warehouse, con=con)


def _json_block(html: str, block_id: str) -> object:
    match = re.search(rf'<script type="application/json" id="{block_id}">(.*?)</script>', html, re.S)
    assert match, block_id
    return json.loads(match.group(1))


def test_headline_is_the_warehouse_totals(synced: Synced) -> None:
    data = collect_of(synced.warehouse)
    h = data.headline
    # the namespaces' own companies are never counted as counterparties (README: analysts
    # filter `not is_own_company`); their documents are listed apart
    assert {**{k: h[k] for k in ("counterparties", "questionnaires", "answered_fields", "expired",
                                 "expiring", "sync_issues")},
            "own_expiring": h["own_expired"] + h["own_expiring"]} == headline_totals(synced.warehouse)
    assert h["expired"] > 0 and h["expiring"] > 0 and h["sync_issues"] > 0
    assert len(data.expiring_documents.rows) == h["expired"] + h["expiring"]
    assert len(data.own_expiring_documents.rows) == h["own_expired"] + h["own_expiring"]
    names = {row[0] for row in query(synced.warehouse, "select company_name from analytics.document_expiry "
                                      "where is_own_company")}
    assert not names & {row[0] for row in data.expiring_documents.rows}
    assert sum(t["documents"] for t in data.timeline) + sum(data.undated_documents.values()) == h[
        "documents"
    ]
    # every counterparty with a questionnaire has one completeness row, with exact sums
    (companies, answered) = query(
        synced.warehouse,
        "select count(distinct company_id), sum(answered_fields) "
        "from analytics.questionnaire_completeness where company_id <> namespace_company_id",
    )[0]
    assert len(data.completeness.rows) == companies
    column = data.completeness.columns.index("answered_fields")
    assert sum(r[column] for r in data.completeness.rows) == answered
    assert sum(b["counterparties"] for b in data.completeness_buckets) == companies
    # freshness: one row per synced namespace, each synced twice successfully
    assert {r[0] for r in data.freshness.rows} == {
        ns for (ns,) in query(synced.warehouse, "select distinct namespace_company_id from raw.sync_runs")
    }
    assert all(r[data.freshness.columns.index("successful_syncs")] == 2 for r in data.freshness.rows)


def test_changes_since_the_previous_sync(synced: Synced) -> None:
    """The section lists analytics.changes of each namespace's latest sync: exactly the
    four edits made between the syncs, the dropped connection as one row."""
    changes = collect_of(synced.warehouse).changes
    assert changes["available"] and all(n["previous"] for n in changes["namespaces"])
    listed = changes["list"]
    rows = [dict(zip(listed.columns, r, strict=True)) for r in listed.rows]
    company, type_id, field_id = synced.changed_answer
    ns, removed = synced.removed_connection
    seen = {(r["change_kind"], r["company_id"], r["item"]) for r in rows}
    label = query(synced.warehouse, "select any_value(field_label) from analytics.answers where company_id = ? "
                  "and company_type_id = ? and field_id = ?", company, type_id, field_id)[0][0]
    assert seen == {
        ("answer_changed", company, label),  # the question, in words
        ("document_changed", *_document(synced, synced.changed_document)),
        ("document_newly_expired", *_document(synced, synced.changed_document)),  # moved to 2021
        ("document_removed", *_document(synced, synced.deleted_document)),
        ("connection_removed", removed, None),
    }
    assert {r["after"] for r in rows if r["change_kind"] == "answer_changed"} == {"Revised answer"}
    assert {r["after"] for r in rows if r["change_kind"] == "document_changed"} == {
        "expiration date: 2021-03-04"}
    assert {r["after"] for r in rows if r["change_kind"] == "document_newly_expired"} == {
        "expired since 2021-03-04"}
    assert [r["namespace_company_id"] for r in rows if r["change_kind"] == "connection_removed"] == [ns]
    assert changes["total"] == len(rows) == sum(changes["counts"].values())
    html = render_html(collect_of(synced.warehouse))
    assert len(_json_block(html, "report-tables")["changes"]["rows"]) == len(rows)  # type: ignore[index]


def _document(synced: Synced, document_id: str) -> tuple[str, str]:
    [(company_id, name)] = query(synced.warehouse, "select company_id, any_value(name) from raw.documents "
                                 "where document_id = ? group by 1", document_id)
    return company_id, name


def test_first_sync_reports_no_changes(synced: Synced) -> None:
    data = collect_of(synced.first_sync)
    assert data.changes["namespaces"] and not any(n["previous"] for n in data.changes["namespaces"])
    assert data.changes["list"].rows == [] and data.changes["total"] == 0
    html = render_html(data)
    assert html.count("has been synced once: nothing to compare yet") == len(data.changes["namespaces"])


def test_the_page_is_self_contained(synced: Synced) -> None:
    html = synced.report.read_text(encoding="utf-8")
    # nothing loaded from elsewhere: no external scripts, styles, images or frames in the
    # markup (the inline scripts' bodies are code, not markup)
    markup = re.sub(r"(<script\b[^>]*>).*?(</script>)", r"\1\2", html, flags=re.S)
    assert markup.count("<script") == 5  # 3 JSON blocks, the Vega bundle, the page script
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)\s*=", markup, re.I)
    assert "default-src 'none'" in html  # and the browser is told to fetch nothing
    assert "vegaEmbed" in html and "window.vegaLite" in html  # the libraries are inline
    specs = _json_block(html, "report-specs")
    assert set(specs) == {"timeline", "completeness", "least-complete"}  # type: ignore[arg-type]
    assert all(s["$schema"].startswith("https://vega.github.io/schema/vega-lite/") for s in specs.values())  # type: ignore[union-attr]
    tables = _json_block(html, "report-tables")
    data = collect_of(synced.warehouse)
    assert tables["expiring"]["rows"] == data.expiring_documents.rows  # type: ignore[index]
    for key, label in (("expired", "documents expired"), ("sync_issues", "open sync issues")):
        assert re.search(
            rf'data-total="{key}"><span class="n">{data.headline[key]:,}</span><span class="label">{label}',
            html,
        )


def test_text_from_the_service_cannot_inject_markup(synced: Synced, tmp_path: Path) -> None:
    data = collect_of(synced.warehouse)
    data.expiring_documents.rows[0][4] = "</script><script>alert(1)</script>"
    data.namespace_names = {k: "<b>x</b>" for k in data.namespace_names}
    html = render_html(data)
    assert "</script><script>alert(1)" not in html
    assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
    tables = _json_block(html, "report-tables")
    assert tables["expiring"]["rows"][0][4] == "</script><script>alert(1)</script>"  # type: ignore[index]


def test_missing_warehouse_or_models_is_not_ready(tmp_path: Path) -> None:
    with pytest.raises(WarehouseNotReadyError, match="no warehouse at"):
        report_step(Warehouse(tmp_path / "none.duckdb"), tmp_path / "r.html")
    empty = tmp_path / "empty.duckdb"
    duckdb.connect(str(empty)).close()
    with pytest.raises(WarehouseNotReadyError,
                       match="no analytics schema; run `diligence models --warehouse .*` first"):
        report_step(Warehouse(empty), tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_the_report_reads_the_marts_alone(synced: Synced, tmp_path: Path) -> None:
    """Every figure, the changes and the namespaces' names come from `analytics`: the
    same warehouse without its `raw` schema gives the same report data."""
    copy = tmp_path / "analytics-only.duckdb"
    copy.write_bytes(synced.warehouse.read_bytes())
    with duckdb.connect(str(copy)) as con:
        con.execute("drop schema raw cascade")
    full, alone = collect_of(synced.warehouse), collect_of(copy)
    assert alone.namespace_names and alone.namespace_names == full.namespace_names
    for name in ("headline", "freshness", "completeness", "changes", "sync_issues",
                 "expiring_documents", "timeline"):
        assert getattr(alone, name) == getattr(full, name), name
