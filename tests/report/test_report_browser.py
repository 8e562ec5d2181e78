"""The report in a real browser (headless Chromium): the charts drew, and the totals and
table counts it shows are the warehouse's."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.helpers import query

from .browser import dump_dom, screenshot
from .conftest import Synced, headline_totals

pytestmark = pytest.mark.slow


class Elements(HTMLParser):
    """Per element of interest: its attributes and, for a few, the text inside."""

    def __init__(self) -> None:
        super().__init__()
        self.body: dict[str, str | None] = {}
        self.charts: dict[str, dict[str, int]] = {}
        self.totals: dict[str, str] = {}
        self.tables: dict[str, dict[str, str | None]] = {}
        self._chart: str | None = None
        self._chart_depth = 0
        self._total: str | None = None
        self._in_number = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "body":
            self.body = a
        if self._chart:
            self._chart_depth += 1
            counts = self.charts[self._chart]
            counts[tag] = counts.get(tag, 0) + 1
            if a.get("role") == "graphics-symbol":
                counts["marks"] = counts.get("marks", 0) + 1
        elif "data-chart" in a:
            self._chart, self._chart_depth = str(a["data-chart"]), 1
            self.charts[self._chart] = {"drawn": a.get("data-drawn") == "true"}  # type: ignore[dict-item]
        if "data-total" in a:
            self._total = a["data-total"]
        if self._total and a.get("class") == "n":
            self._in_number = True
        if "data-table" in a:
            self.tables[str(a["data-table"])] = a

    def handle_endtag(self, tag: str) -> None:
        if self._chart:
            self._chart_depth -= 1
            if self._chart_depth == 0:
                self._chart = None
        if self._in_number and tag == "span":
            self._in_number, self._total = False, None

    def handle_data(self, data: str) -> None:
        if self._in_number and self._total:
            self.totals[self._total] = self.totals.get(self._total, "") + data


@pytest.fixture(scope="module")
def rendered(synced: Synced) -> tuple[str, Elements]:
    dom, _ = dump_dom(synced.report)
    parsed = Elements()
    parsed.feed(dom)
    return dom, parsed


def test_charts_drew_as_svg(rendered: tuple[str, Elements]) -> None:
    _, page = rendered
    assert page.body.get("data-charts-drawn") == "3"
    assert set(page.charts) == {"timeline", "completeness", "least-complete"}
    for name, counts in page.charts.items():
        assert counts["drawn"], name
        assert counts.get("svg", 0) >= 1, name
        assert counts.get("marks", 0) >= 1 and counts.get("path", 0) >= 3, (name, counts)


def test_totals_shown_are_the_warehouse_totals(synced: Synced, rendered: tuple[str, Elements]) -> None:
    _, page = rendered
    keys = ("counterparties", "questionnaires", "answered_fields", "expired", "expiring", "sync_issues")
    shown = {k: int(page.totals[k].replace(",", "")) for k in keys}
    totals = headline_totals(synced.warehouse)
    assert shown == {k: totals[k] for k in keys}


def test_tables_were_built_by_the_script(synced: Synced, rendered: tuple[str, Elements]) -> None:
    dom, page = rendered
    expected = {
        "expiring": "select count(*) from analytics.document_expiry "
        "where expiry_status in ('expired', 'expiring') and not is_own_company",
        "completeness": "select count(distinct company_id) from analytics.questionnaire_completeness "
        "where company_id <> namespace_company_id",
        "issues": "select count(*) from analytics.sync_issues",
    }
    for table, sql in expected.items():
        (count,) = query(synced.warehouse, sql)[0]
        assert page.tables[table].get("data-rows") == str(count), table
        # and the pager says so, e.g. "1–25 of 53 documents"
        section = dom[dom.index(f'data-table="{table}"'):]
        shown = re.search(r'class="count">([\d,]+)</b>', section)
        assert shown and int(shown.group(1).replace(",", "")) == count, table
    (changes,) = query(synced.warehouse, "select count(*) from analytics.changes c where detected_at = "
                       "(select max(synced_at) from analytics.sync_runs r "
                       "where r.namespace_company_id = c.namespace_company_id)")[0]
    assert page.tables["changes"].get("data-rows") == str(changes)  # the change feed
    assert "Revised answer" in dom  # the changed answer is listed


def test_the_changes_speak_in_words_and_fit_their_card(synced: Synced, rendered: tuple[str, Elements],
                                                      tmp_path: Path) -> None:
    """At 1,280 pixels nothing runs past its card; the changes show the question's label
    and the document's name, dates as dates, sync issues their message: no ids, no JSON."""
    dom, page = rendered
    assert page.body.get("data-overflow-px") == "0"
    company, type_id, field_id = synced.changed_answer
    (label,) = query(synced.warehouse, "select field_label from analytics.answers where company_id = ? "
                     "and company_type_id = ? and field_id = ? limit 1", company, type_id, field_id)[0]
    (name,) = query(synced.warehouse, "select any_value(document_name) from analytics.document_history "
                    "where document_id = ?", synced.changed_document)[0]
    changes = dom[dom.index('data-table="changes"'):dom.index('data-table="issues"')]
    assert f"<td>{label}</td>" in changes and f"<td>{name}</td>" in changes
    assert "expiration date: 2021-03-04" in changes
    assert "{&quot;" not in changes and '{"' not in changes and "T00:00:00" not in changes
    issues = dom[dom.index('data-table="issues"'):]
    assert '{"message"' not in issues and "{&quot;message" not in issues
    png = screenshot(synced.report, tmp_path / "report.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_an_empty_warehouse_still_draws(tmp_path: Path) -> None:
    """Models built over an empty raw layer: zero everywhere, charts and tables still draw."""
    from diligence.analytics.models import build_models
    from diligence.steps import report_step
    from diligence.warehouse import Warehouse
    from tests.models.rawdb import create_raw

    warehouse = create_raw(tmp_path / "empty.duckdb")
    build_models(warehouse)
    dom, _ = dump_dom(report_step(Warehouse(warehouse), tmp_path / "r.html").path)
    page = Elements()
    page.feed(dom)
    assert page.body.get("data-charts-drawn") == "3"
    assert {k: v.strip() for k, v in page.totals.items()} == {
        k: "0" for k in ("counterparties", "questionnaires", "answered_fields", "expired",
                         "expiring", "sync_issues")
    }
    assert all(t.get("data-rows") in ("0", "unavailable") for t in page.tables.values())


INTERACT = """
<script>
(function () {
  var el = document.querySelector('[data-table="completeness"]');
  var heads = Array.prototype.slice.call(el.querySelectorAll("th"));
  var pct = heads.filter(function (th) { return th.textContent === "completeness %"; })[0];
  var index = heads.indexOf(pct);
  function firstCell() { return el.querySelector("tbody tr").cells[index].textContent; }
  function info() { return el.querySelector(".info").textContent; }
  var out = document.body.dataset;
  pct.click(); out.ascFirst = firstCell();
  pct.click(); out.descFirst = firstCell(); out.descSort = pct.getAttribute("aria-sort");
  el.querySelector("button:nth-of-type(2)").click(); out.page2 = info();
  var filter = el.querySelector("input");
  filter.value = "FILTER_TEXT"; filter.dispatchEvent(new Event("input"));
  out.filtered = info(); out.filteredRows = String(el.querySelectorAll("tbody tr").length);
})();
</script>
</body>"""


def test_tables_sort_page_and_filter(synced: Synced, tmp_path: Path) -> None:
    """Click a heading twice, go to page 2, type a filter: in the browser, on the real page."""
    rows = query(
        synced.warehouse,
        """
        select c.company_id, any_value(c.company_name),
               round(100.0 * sum(answered_fields) / nullif(sum(answerable_fields), 0), 1)
        from analytics.questionnaire_completeness c
        where company_id <> namespace_company_id group by 1
        """,
    )
    assert len(rows) > 15
    lowest = min(r[2] for r in rows if r[2] is not None)
    highest = max(r[2] for r in rows if r[2] is not None)
    word = sorted(rows, key=lambda r: r[1])[0][1].split()[0]  # first word of a name
    matching = sum(1 for r in rows if word.lower() in (r[1] or "").lower())
    html = synced.report.read_text(encoding="utf-8")
    page = tmp_path / "interact.html"
    page.write_text(html.replace("</body>", INTERACT.replace("FILTER_TEXT", word)), encoding="utf-8")
    dom, _ = dump_dom(page)
    body = re.search(r"<body([^>]*)>", dom)
    assert body
    attrs = dict(re.findall(r'data-([\w-]+)="([^"]*)"', body.group(1)))
    assert float(attrs["asc-first"]) == lowest
    assert float(attrs["desc-first"]) == highest and attrs["desc-sort"] == "descending"
    assert attrs["page2"].startswith(f"16–{min(30, len(rows))} of {len(rows)} counterparties")
    assert attrs["filtered"].startswith(f"1–{min(15, matching)} of {matching} counterparties")
    assert int(attrs["filtered-rows"]) == min(15, matching)
