"""`diligence status`: what the last syncs did and how fresh the warehouse is."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
from rich.console import Console
from rich.table import Table

from .warehouse import table_names

RAW_COUNTS = {
    "companies (current)": "select count(*) from raw.companies where _dlt_valid_to is null",
    "connections (current)": "select count(*) from raw.connections where _dlt_valid_to is null",
    "questionnaire_templates": "select count(*) from raw.questionnaire_templates",
    "questionnaires (current)": "select count(*) from raw.questionnaires where _dlt_valid_to is null",
    "questionnaires (all versions)": "select count(*) from raw.questionnaires",
    "documents (current)": "select count(*) from raw.documents where _dlt_valid_to is null",
    "documents (all versions)": "select count(*) from raw.documents",
    "document_files": "select count(*) from raw.document_files",
}


def _age(then: datetime | None) -> str:
    if then is None:
        return "never"
    seconds = (datetime.now(timezone.utc) - then).total_seconds()
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit} ago"
    return f"{seconds:.0f}s ago"


def render_status(warehouse: Path | str, console: Console, con: Any | None = None) -> None:
    """Print last syncs, freshness per namespace, row counts and open sync issues
    (through `con`, an open connection to the warehouse, e.g. a lake's, when given)."""
    owned = con is None
    if con is None:
        con = duckdb.connect(str(warehouse), read_only=True)
    try:
        tables = table_names(con)
        if "raw.sync_runs" not in tables:
            console.print(f"{warehouse}: no sync has run yet")
            return
        syncs = Table(title="Last syncs")
        for column in ("sync", "started", "namespaces ok", "failed", "requests", "rows", "issues"):
            syncs.add_column(column)
        for row in con.execute(
            """
            select sync_id, min(started_at), count(*) filter (where status = 'success'),
                   count(*) filter (where status <> 'success'), sum(requests), sum(rows_loaded),
                   sum(issues)
            from raw.sync_runs group by sync_id order by min(started_at) desc limit 10
            """
        ).fetchall():
            syncs.add_row(*(str(v) if v is not None else "" for v in row))
        console.print(syncs)

        fresh = Table(title="Freshness per namespace")
        for column in ("namespace", "last success", "age", "last outcome", "last error"):
            fresh.add_column(column)
        for ns, last_ok, last_status, last_error in con.execute(
            """
            select namespace_company_id,
                   max(synced_at) filter (where status = 'success'),
                   arg_max(status, synced_at), arg_max(error, synced_at)
            from raw.sync_runs group by 1 order by 1
            """
        ).fetchall():
            fresh.add_row(ns, str(last_ok or ""), _age(last_ok), last_status, last_error or "")
        console.print(fresh)

        counts = Table(title="Rows")
        counts.add_column("table")
        counts.add_column("rows", justify="right")
        for name, sql in RAW_COUNTS.items():
            if f"raw.{name.split(' ')[0]}" in tables:
                counts.add_row(f"raw.{name}", str(con.execute(sql).fetchall()[0][0]))  # type: ignore[index]
        for table in sorted(t for t in tables if t.startswith("analytics.")):
            counts.add_row(table, str(con.execute(f"select count(*) from {table}").fetchall()[0][0]))  # type: ignore[index]
        console.print(counts)

        if "analytics.sync_issues" in tables:
            issues = con.execute(
                """
                select endpoint, http_status, count(*) from analytics.sync_issues
                group by all order by 3 desc
                """
            ).fetchall()
            if issues:
                table = Table(title="Open sync issues (latest sync)")
                for column in ("endpoint", "status", "count"):
                    table.add_column(column)
                for endpoint, http_status, count in issues:
                    table.add_row(endpoint, str(http_status), str(count))
                console.print(table)
            else:
                console.print("No open sync issues.")
    finally:
        if owned:
            con.close()
