"""`diligence report`: one self-contained HTML file about the warehouse.

Shape: :func:`diligence.report.data.collect` reads the numbers (read-only), the charts
are Vega-Altair specifications, and the Jinja2 template ``templates/report.html.j2``
lays everything out. Nothing is fetched when the file is opened: the Vega, Vega-Lite and
Vega-Embed libraries are inlined from the bundle that ``vl-convert-python`` builds (cached
on disk after the first build), the CSS and the small table script are in the template,
and the table rows travel as JSON inside the page. The browser draws the charts as SVG
and pages, sorts and filters the tables, so a warehouse of 10,000 counterparties opens
as fast as a small one: charts get aggregates, tables show 15 rows at a time.
"""

from __future__ import annotations

import functools
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import altair as alt
import jinja2
import vl_convert as vlc
from markupsafe import Markup

from ..errors import ReportError
from ..warehouse.filemodes import make_dirs, protect
from .data import ReportData, Table, collect

__all__ = ["ReportError", "ReportResult", "render_html", "vega_bundle", "write_report"]

DEFAULT_REPORT = Path("reports/report.html")
TEMPLATE = "report.html.j2"

STATUS_COLORS = {"expired": "#c0392b", "expiring": "#e67e22", "valid": "#2e8b57"}


@dataclass
class ReportResult:
    path: Path
    bytes: int
    seconds: float
    headline: dict[str, int]


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "diligence"


@functools.lru_cache(maxsize=1)
def vega_bundle() -> str:
    """The Vega + Vega-Lite + Vega-Embed JavaScript bundle (about 0.9 MB) matching
    Altair's Vega-Lite version; built by vl-convert once, then read from the cache."""
    vl_version = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    cached = _cache_dir() / f"vega-bundle-{vlc.__version__}-vl{vl_version}.js"
    try:
        return cached.read_text(encoding="utf-8")
    except OSError:
        pass
    bundle = vlc.javascript_bundle(vl_version=vl_version)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(bundle, encoding="utf-8")
        partial.replace(cached)
    except OSError:  # a read-only home only costs the rebuild next time
        pass
    return bundle


# -- charts -----------------------------------------------------------------------------
def timeline_chart(data: ReportData) -> dict[str, Any]:
    """Documents per expiration month, stacked by status, with a rule at the evaluation day."""
    statuses = list(STATUS_COLORS)
    bars = (
        alt.Chart(alt.Data(values=data.timeline))
        .mark_bar()
        .encode(
            x=alt.X("month:T", timeUnit="yearmonth", title="expiration month"),
            y=alt.Y("sum(documents):Q", title="documents"),
            color=alt.Color(
                "status:N",
                scale=alt.Scale(domain=statuses, range=list(STATUS_COLORS.values())),
                legend=alt.Legend(title=None, orient="top"),
            ),
            order=alt.Order("status_order:Q"),
            tooltip=[
                alt.Tooltip("month:T", timeUnit="yearmonth", title="month"),
                alt.Tooltip("status:N"),
                alt.Tooltip("sum(documents):Q", title="documents"),
            ],
        )
        .transform_calculate(status_order=f"indexof({json.dumps(statuses)}, datum.status)")
    )
    today = (data.evaluated_at or data.generated_at).date().isoformat()
    rule = (
        alt.Chart(alt.Data(values=[{"day": today, "label": "today"}]))
        .mark_rule(strokeDash=[4, 4], color="#333")
        .encode(x="day:T")
    )
    label = rule.mark_text(align="left", dx=4, dy=-6, color="#333").encode(
        text="label:N", y=alt.value(0)
    )
    chart = alt.layer(bars, rule, label).properties(width="container", height=240)
    return chart.to_dict()


def completeness_chart(data: ReportData) -> dict[str, Any]:
    """How many counterparties fall in each 10% band of completeness."""
    chart = (
        alt.Chart(alt.Data(values=data.completeness_buckets))
        .mark_bar(color="#3b6ea5")
        .encode(
            x=alt.X(
                "bucket:N",
                sort=alt.EncodingSortField("low", order="ascending"),
                title="answered fields / answerable fields",
                axis=alt.Axis(labelAngle=0),
            ),
            y=alt.Y("counterparties:Q", title="counterparties"),
            tooltip=["bucket:N", "counterparties:Q"],
        )
        .properties(width="container", height=220)
    )
    return chart.to_dict()


def least_complete_chart(data: ReportData, limit: int = 15) -> dict[str, Any]:
    """The `limit` least complete counterparties (the table has them all)."""
    columns = data.completeness.columns
    rows = [dict(zip(columns, row, strict=True)) for row in data.completeness.rows]
    rows = [r for r in rows if r["completeness_pct"] is not None][:limit]
    chart = (
        alt.Chart(alt.Data(values=rows))
        .mark_bar(color="#8e44ad")
        .encode(
            x=alt.X("completeness_pct:Q", title="completeness %", scale=alt.Scale(domain=[0, 100])),
            y=alt.Y("counterparty:N", sort="x", title=None),
            tooltip=["counterparty:N", "completeness_pct:Q", "answered_fields:Q",
                     "answerable_fields:Q", "questionnaires:Q"],
        )
        .properties(width="container", height=max(60, 18 * len(rows)))
    )
    return chart.to_dict()


# -- page -------------------------------------------------------------------------------
def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element (no '</script>' or '<!--' can appear)."""
    return json.dumps(value, separators=(",", ":"), default=str).replace("<", "\\u003c")


def _table_dict(table: Table | None) -> dict[str, Any] | None:
    return None if table is None else {"columns": table.columns, "rows": table.rows}


@functools.lru_cache(maxsize=1)
def _environment() -> Any:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("diligence.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_html(data: ReportData) -> str:
    """The report page for `data`, with every library inlined."""
    changes = data.changes
    specs = {
        "timeline": timeline_chart(data),
        "completeness": completeness_chart(data),
        "least-complete": least_complete_chart(data),
    }
    tables = {
        "expiring": _table_dict(data.expiring_documents),
        "own-expiring": _table_dict(data.own_expiring_documents),
        "completeness": _table_dict(data.completeness),
        "changes": _table_dict(changes.get("list")),
        "issues": _table_dict(data.sync_issues),
    }
    namespaces = changes.get("namespaces", [])
    return _environment().get_template(TEMPLATE).render(
        data=data,
        generated=data.generated_at.strftime("%Y-%m-%d %H:%M UTC"),
        evaluated=(data.evaluated_at or data.generated_at).strftime("%Y-%m-%d %H:%M UTC"),
        freshness=[dict(zip(data.freshness.columns, r, strict=True)) for r in data.freshness.rows],
        vega_bundle=Markup(vega_bundle()),
        specs=Markup(_script_json(specs)),
        tables=Markup(_script_json(tables)),
        namespace_names=Markup(_script_json(data.namespace_names)),
        compared=[n for n in namespaces if n["previous"]],
        first_syncs=[n for n in namespaces if not n["previous"]],
    )


def write_report(warehouse: Path | str, out: Path = DEFAULT_REPORT, *, con: Any) -> ReportResult:
    """Read `warehouse` through `con`, the step's session of it, and write the report to
    `out` (atomically); raises :class:`ReportError` when its analytics schema is missing."""
    started = time.perf_counter()
    data = collect(warehouse, con=con)
    html = render_html(data)
    make_dirs(out.parent)
    partial = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    partial.write_text(html, encoding="utf-8")
    protect(partial)  # names and documents of counterparties: owner-only (or group)
    partial.replace(out)
    return ReportResult(
        path=out,
        bytes=out.stat().st_size,
        seconds=time.perf_counter() - started,
        headline=data.headline,
    )
