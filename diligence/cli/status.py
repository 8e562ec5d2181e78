"""`diligence status`: what the last syncs did and how fresh the warehouse is.

:func:`collect_status` reads everything once into a plain dict with stable keys (the
``--json`` output, documented in docs/cli.md); :func:`render_status` prints the same as
tables. The shape::

    {"warehouse": "...", "sync_running": {"pid": 4242} | null, "state": "ready" |
     "creating" | "busy" | "empty" | "missing",
     "syncs": [{"sync_id", "started_at", "namespaces_ok", "namespaces_failed",
                "requests", "rows", "issues"}],                  # newest first, 10
     "namespaces": [{"namespace_company_id", "last_success_at", "age_seconds",
                     "last_status", "last_error"}],
     "row_counts": {"raw.companies": 12, "raw.companies.current": 10, ...,
                    "analytics.answers": 340, ...},
     "open_sync_issues": [{"endpoint", "http_status", "count"}],
     "open_sync_issues_total": 3,
     "failed_attempts": [{"at", "pid", "error"}],               # since the last sync
     "resumable": [{"namespace_company_id", "requests_kept", "since"}],
     "evidence": {"path", "head", "syncs", "responses", "bytes"} | null,
     "changes": {"sync_id", "total", "counts": {"answer_changed": 3, ...}},  # once modelled
     "sources": [{"table", "status", "max_loaded_at", "age_seconds"}]}  # --sources only

A sync that failed before any namespace (credentials, user-info, unreachable) is not
in ``raw.sync_runs``; it is read from :mod:`diligence.attempts`. While a sync holds the
writer lock (:mod:`diligence.warehouse.lock`) the status says so, and while the first sync
creates the warehouse it says only that. ``resumable`` lists the namespaces an
interrupted sync left unfinished (its manifest, :mod:`diligence.resume`): the next sync
goes on from them. ``evidence`` is the evidence store (null: evidence is off). ``sources`` (``--sources``) is ``dbt source freshness`` on the raw tables,
with the thresholds of the dbt project (:mod:`diligence.analytics.dbt_docs`).
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
from rich.console import Console
from rich.table import Table

from ..analytics.dbt_docs import source_freshness
from ..analytics.digest import KINDS
from ..attempts import failed_attempts
from ..errors import WarehouseBusyError
from ..evidence.chain import evidence_summary as evidence_status
from ..resume import resumable_namespaces
from ..safe_text import console_text
from ..warehouse import Warehouse, table_names
from ..warehouse.lock import creating, lock_holder
from ..words import counted

__all__ = ["RAW_COUNTS", "collect_status", "evidence_status", "render_status", "resumable_status",
           "source_freshness_status"]

#: raw tables counted: key in `row_counts` -> query
RAW_COUNTS = {
    "raw.user_roles": "select count(*) from raw.user_roles",
    "raw.companies": "select count(*) from raw.companies",
    "raw.companies.current": "select count(*) from raw.companies where _dlt_valid_to is null",
    "raw.connections": "select count(*) from raw.connections",
    "raw.connections.current": "select count(*) from raw.connections where _dlt_valid_to is null",
    "raw.questionnaire_templates": "select count(*) from raw.questionnaire_templates",
    "raw.questionnaires": "select count(*) from raw.questionnaires",
    "raw.questionnaires.current": "select count(*) from raw.questionnaires where _dlt_valid_to is null",
    "raw.documents": "select count(*) from raw.documents",
    "raw.documents.current": "select count(*) from raw.documents where _dlt_valid_to is null",
    "raw.document_files": "select count(*) from raw.document_files",
}


def _iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.isoformat()


def _age_seconds(then: datetime | None) -> float | None:
    if then is None:
        return None
    if then.tzinfo is None:
        then = then.replace(tzinfo=timezone.utc)
    return round((datetime.now(timezone.utc) - then).total_seconds(), 1)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit} ago"
    return f"{seconds:.0f}s ago"


def _empty(warehouse: Path | str, state: str, holder: int | None) -> dict[str, Any]:
    return {
        "warehouse": str(warehouse),
        "state": state,
        "sync_running": {"pid": holder} if holder is not None else None,
        "syncs": [],
        "namespaces": [],
        "row_counts": {},
        "open_sync_issues": [],
        "open_sync_issues_total": 0,
        "failed_attempts": [],
        "resumable": [],
    }


def _attempts_since(warehouse: Path, since: datetime | None) -> list[dict[str, Any]]:
    attempts = failed_attempts(warehouse)
    if since is not None:
        since = since if since.tzinfo else since.replace(tzinfo=timezone.utc)
        attempts = [a for a in attempts if datetime.fromisoformat(a.at) > since]
    return [asdict(a) for a in attempts[-10:]]


def resumable_status(owner: Warehouse) -> list[dict[str, Any]]:
    """The ``resumable`` part of the status: what an interrupted sync left to go on from."""
    return [
        {"namespace_company_id": j.namespace, "requests_kept": j.requests_kept, "since": _iso(j.since)}
        for j in resumable_namespaces(owner)
    ]


def collect_status(owner: Warehouse) -> dict[str, Any]:
    """Everything `status` shows, as plain JSON-able values (see the module docstring),
    except ``resumable`` (see :func:`resumable_status`), read through one read-only
    session of `owner`. A lake has no lock file and no failed-attempts file, so those
    parts stay empty."""
    if owner.path is None:
        with owner.session(read_only=True, memory_limit=None) as con:
            return _collect(owner.display(), con, holder=None, attempts_of=None)
    warehouse = owner.path
    holder = lock_holder(warehouse)
    if not warehouse.exists():
        status = _empty(warehouse, "creating" if holder is not None else "missing", holder)
        status["failed_attempts"] = _attempts_since(warehouse, None)
        return status
    with contextlib.ExitStack() as stack:
        try:
            con = stack.enter_context(owner.session(read_only=True, memory_limit=None))
        except (duckdb.Error, WarehouseBusyError):
            holder = holder if holder is not None else lock_holder(warehouse)  # it may have just begun
            if holder is None:
                raise
            status = _empty(warehouse, "creating" if creating(warehouse) else "busy", holder)
            status["failed_attempts"] = _attempts_since(warehouse, None)
            return status
        # read again: while this session holds the lock shared, a sync can only be
        # waiting for it, about to write
        return _collect(warehouse, con, holder=lock_holder(warehouse), attempts_of=warehouse)


def _collect(
    warehouse: Path | str, con: Any, *, holder: int | None, attempts_of: Path | None
) -> dict[str, Any]:
    def attempts(since: datetime | None) -> list[dict[str, Any]]:
        return _attempts_since(attempts_of, since) if attempts_of is not None else []

    tables = table_names(con)
    if "raw.sync_runs" not in tables:
        status = _empty(warehouse, "creating" if holder is not None else "empty", holder)
        status["failed_attempts"] = attempts(None)
        return status
    status = _empty(warehouse, "ready", holder)
    status["syncs"] = [
        dict(zip(("sync_id", "started_at", "namespaces_ok", "namespaces_failed", "requests", "rows", "issues"),
                 (sync_id, _iso(started), ok, failed, requests, rows, issues), strict=True))
        for sync_id, started, ok, failed, requests, rows, issues in con.execute(
            """
            select sync_id, min(started_at), count(*) filter (where status = 'success'),
                   count(*) filter (where status <> 'success'), sum(requests)::bigint,
                   sum(rows_loaded)::bigint, sum(issues)::bigint
            from raw.sync_runs group by sync_id order by min(started_at) desc limit 10
            """
        ).fetchall()
    ]
    for ns, last_ok, last_status, last_error in con.execute(
        """
        select namespace_company_id,
               max(synced_at) filter (where status = 'success'),
               arg_max(status, synced_at), arg_max(error, synced_at)
        from raw.sync_runs group by 1 order by 1
        """
    ).fetchall():
        status["namespaces"].append(
            {
                "namespace_company_id": ns,
                "last_success_at": _iso(last_ok),
                "age_seconds": _age_seconds(last_ok),
                "last_status": last_status,
                "last_error": last_error,
            }
        )
    counts: dict[str, int] = {}
    for name, sql in RAW_COUNTS.items():
        if ".".join(name.split(".")[:2]) in tables:
            counts[name] = int(con.execute(sql).fetchall()[0][0])  # type: ignore[index]
    for table in sorted(t for t in tables if t.startswith("analytics.")):
        counts[table] = int(con.execute(f"select count(*) from {table}").fetchall()[0][0])  # type: ignore[index]
    status["row_counts"] = counts
    if "analytics.sync_issues" in tables:
        issues = con.execute(
            "select endpoint, http_status, count(*) from analytics.sync_issues "
            "group by all order by 3 desc, 1, 2"
        ).fetchall()
        status["open_sync_issues"] = [
            {"endpoint": e, "http_status": s, "count": int(c)} for e, s, c in issues
        ]
        status["open_sync_issues_total"] = sum(int(c) for _, _, c in issues)
    if "analytics.changes" in tables:
        status["changes"] = _last_changes(con)
    last_sync = con.execute("select max(synced_at) from raw.sync_runs").fetchall()[0][0]  # type: ignore[index]
    status["failed_attempts"] = attempts(last_sync)
    return status


def _last_changes(con: Any) -> dict[str, Any]:
    """The last successful sync's changes (analytics.changes), counted per kind."""
    row = con.execute("select arg_max(sync_id, synced_at) from analytics.sync_runs where status = 'success'"
                      ).fetchall()[0]
    counts = dict(con.execute("select change_kind, count(*) from analytics.changes where sync_id = ? group by 1",
                              [row[0]]).fetchall())
    return {"sync_id": row[0], "total": sum(counts.values()),
            "counts": {kind: int(counts[kind]) for kind in KINDS if kind in counts}}


def _running_line(status: dict[str, Any]) -> str | None:
    running = status["sync_running"]
    if running is None:
        return None
    pid = running["pid"] or "unknown"
    if status["state"] == "creating":
        return f"a sync (pid {pid}) is creating this warehouse; its status shows once it has loaded"
    if status["state"] == "busy":
        return f"a sync (pid {pid}) is writing this warehouse; its status shows once it has finished"
    return f"a sync (pid {pid}) is running now; below: the syncs before it"


def render_status(warehouse: Path | str, console: Console, status: dict[str, Any]) -> dict[str, Any]:
    """Print last syncs, freshness per namespace, row counts, open sync issues and
    failed attempts of `status` (from :func:`collect_status`); returns it."""
    running = _running_line(status)
    if running:
        console.print(f"{warehouse}: {running}", highlight=False)
    if status["state"] == "empty" or (status["state"] == "missing" and status["failed_attempts"]):
        console.print(f"{warehouse}: no sync has completed yet", highlight=False)
    if status["failed_attempts"]:
        failed = Table(title="Failed sync attempts (nothing loaded)")
        for column in ("at", "pid", "error"):
            failed.add_column(column)
        for attempt in status["failed_attempts"]:
            failed.add_row(attempt["at"], str(attempt["pid"]), console_text(attempt["error"]))
        console.print(failed)
    if status.get("resumable"):
        table = Table(title="Interrupted sync: the next sync resumes these (--restart: from zero)")
        for column in ("namespace", "requests kept", "since"):
            table.add_column(column)
        for resumable in status["resumable"]:
            table.add_row(console_text(resumable["namespace_company_id"]),
                          f"{resumable['requests_kept']:,}", resumable["since"] or "")
        console.print(table)
    evidence = status.get("evidence")
    if evidence and evidence["head"]:
        console.print(f"evidence: {counted(evidence['syncs'], 'sealed sync')}, "
                      f"{counted(evidence['responses'], 'response')}, "
                      f"{evidence['bytes'] / 1e6:.1f} MB in {console_text(evidence['path'])}; head {evidence['head']}",
                      highlight=False)
    if status["state"] != "ready":
        return status

    syncs = Table(title="Last syncs")
    for column in ("sync", "started", "namespaces ok", "failed", "requests", "rows received", "sync issues"):
        syncs.add_column(column)
    for sync in status["syncs"]:
        syncs.add_row(*("" if v is None else str(v) for v in sync.values()))
    console.print(syncs)

    fresh = Table(title="Freshness per namespace")
    for column in ("namespace", "last success", "age", "last outcome", "last error"):
        fresh.add_column(column)
    for ns in status["namespaces"]:
        fresh.add_row(
            console_text(ns["namespace_company_id"]), ns["last_success_at"] or "", _age(ns["age_seconds"]),
            ns["last_status"], console_text(ns["last_error"] or ""),
        )
    console.print(fresh)

    if status.get("sources"):
        table = Table(title="Raw tables (dbt source freshness)")
        for column in ("table", "freshness", "last loaded", "age"):
            table.add_column(column)
        for source in status["sources"]:
            table.add_row(source["table"], source["status"], source["max_loaded_at"] or "", _age(source["age_seconds"]))
        console.print(table)

    counts = Table(title="Row versions (raw: every version; .current: those in force; analytics: rows)")
    counts.add_column("table")
    counts.add_column("row versions", justify="right")
    for table, rows in status["row_counts"].items():
        counts.add_row(table, str(rows))
    console.print(counts)

    changes = status.get("changes")
    if changes and changes["sync_id"]:
        what = ", ".join(f"{n:,} {kind.replace('_', ' ')}" for kind, n in changes["counts"].items())
        console.print(f"Changes seen by the last sync ({changes['sync_id']}): {what or 'none'}"
                      + ("; `diligence changes` lists them" if what else ""), highlight=False)

    if status["open_sync_issues"]:
        table = Table(title="Open sync issues (latest sync)")
        for column in ("endpoint", "status", "count"):
            table.add_column(column)
        for issue in status["open_sync_issues"]:
            table.add_row(console_text(issue["endpoint"]), str(issue["http_status"]), str(issue["count"]))
        console.print(table)
    elif "analytics.sync_issues" in status["row_counts"]:
        console.print("No open sync issues.")
    return status


def source_freshness_status(warehouse: Any) -> list[dict[str, Any]]:
    """`dbt source freshness` of each raw table, as the ``sources`` key of the status."""
    return [
        {
            "table": source.table,
            "status": source.status,
            "max_loaded_at": source.max_loaded_at.isoformat() if source.max_loaded_at else None,
            "age_seconds": round(source.age_seconds) if source.age_seconds is not None else None,
        }
        for source in source_freshness(warehouse)
    ]
