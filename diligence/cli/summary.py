"""`diligence sync --json-summary FILE`: a machine-readable report of one run.

Built from what the run already counted: each namespace's outcome (requests it needed,
rows, sync issues, durations), the client's traffic counters (attempts sent, retries,
429 answers, overall and per namespace: :class:`~pipelines.company_connections.client.RequestStats`)
and the rows each raw table received. The shape (stable keys, documented in docs/cli.md)::

    {"version": 1, "sync_id": "...", "warehouse": "...", "synced_at": "...",
     "status": "success" | "failed" | "nothing_loaded", "resources": null | [...],
     "overall": {"namespaces", "namespaces_failed", "requests", "attempts", "retries",
                 "throttled_429", "transport_errors", "logins", "relogins", "rows",
                 "row_versions_written", "issues", "duration_seconds", "extract_seconds",
                 "load_seconds", "requests_kept"},
     "rows_per_table": {"documents": 120, ...},                   # over namespaces
     "namespaces": [{"namespace_company_id", "status", "requests", "attempts",
                     "retries", "throttled_429", "rows", "rows_per_table",
                     "row_versions_written", "issues", "duration_seconds", "load_seconds",
                     "error", "requests_kept"}],
     "not_read_again": {"<namespace>": "<why>"},   # committed by an interrupted sync
     "evidence": null | {"head", "break"},         # the chain's head once sealed
     "models": null | {"seconds", "row_counts", "failed_checks", "published"}}

``rows`` are the rows received (each row of a raw table the responses gave: the same
number the progress line counts); ``row_versions_written`` the new versions the commits
wrote into ``raw`` (an unchanged row received writes none). ``requests`` are the logical
requests a namespace sent; ``attempts`` what was sent
for it (retries included); ``requests_kept`` those answered from the evidence of an
interrupted sync that this one resumed (see :mod:`diligence.resume`). ``evidence.head``
is the evidence chain's head once this sync's manifest is sealed (``break``: why the
chain could not be followed, recorded in it; null when it linked); ``evidence`` is null
when the warehouse keeps none. Nothing in it is a secret: no credentials, tokens or URLs
with user info (the base URL is not included at all). Written to a temporary file,
then moved into place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..warehouse.filemodes import write_text_atomically

if TYPE_CHECKING:
    from ..steps import PipelineResult
    from ..sync import SyncResult

__all__ = ["SUMMARY_VERSION", "run_summary", "write_summary"]

SUMMARY_VERSION = 1


def _total_rows_per_table(sync: SyncResult) -> dict[str, int]:
    totals: dict[str, int] = {}
    for outcome in sync.namespaces:
        for table, rows in outcome.rows_per_table.items():
            totals[table] = totals.get(table, 0) + rows
    return dict(sorted(totals.items()))


def run_summary(result: PipelineResult) -> dict[str, Any]:
    """The JSON-able summary of a pipeline run whose sync ran."""
    sync = result.sync
    assert sync is not None, "a run summary needs a sync"
    stats = sync.request_stats or {}
    by_ns: dict[str, dict[str, int]] = stats.get("by_namespace", {})
    namespaces = []
    for o in sync.namespaces:
        counts = by_ns.get(o.namespace_company_id, {})
        namespaces.append(
            {
                "namespace_company_id": o.namespace_company_id,
                "status": o.status,
                "requests": o.requests,
                "attempts": counts.get("requests", 0),
                "retries": counts.get("retries", 0),
                "throttled_429": counts.get("throttled", 0),
                "rows": o.rows,
                "rows_per_table": dict(o.rows_per_table),
                "row_versions_written": o.versions_written,
                "issues": o.issues,
                "duration_seconds": round(o.duration_seconds, 3),
                "load_seconds": round(o.load_seconds, 3),
                "error": o.error,
                "requests_kept": o.requests_kept,
            }
        )
    if result.nothing_loaded:
        status = "nothing_loaded"
    elif sync.failed:
        status = "failed"
    else:
        status = "success"
    models = None
    if result.analytics is not None:
        models = {
            "seconds": round(result.analytics.models.seconds, 3),
            "row_counts": dict(result.analytics.models.row_counts),
            "failed_checks": [c.name for c in result.analytics.failed_checks],
            "published": str(result.analytics.published) if result.analytics.published else None,
        }
    return {
        "version": SUMMARY_VERSION,
        "sync_id": sync.sync_id,
        "warehouse": str(sync.warehouse),
        "synced_at": sync.synced_at.isoformat(),
        "status": status,
        "resources": list(sync.resources) if sync.resources else None,
        "overall": {
            "namespaces": len(sync.namespaces),
            "namespaces_failed": len(sync.failed),
            "requests": sync.requests,
            "attempts": int(stats.get("requests_sent", 0)),
            "retries": int(stats.get("retries", 0)),
            "throttled_429": int(stats.get("throttled", 0)),
            "transport_errors": int(stats.get("transport_errors", 0)),
            "logins": int(stats.get("logins", 0)),
            "relogins": int(stats.get("relogins", 0)),
            "rows": sync.rows,
            "row_versions_written": sync.versions_written,
            "issues": sum(o.issues for o in sync.namespaces),
            "duration_seconds": round(sync.seconds, 3),
            "extract_seconds": round(sync.timings.get("extract", 0.0), 3),
            "load_seconds": round(sync.timings.get("load", 0.0), 3),
            "requests_kept": sum(o.requests_kept for o in sync.namespaces),
        },
        "not_read_again": dict(sync.not_read_again),
        "evidence": {"head": sync.evidence_head, "break": sync.evidence_break} if sync.evidence_head else None,
        "rows_per_table": _total_rows_per_table(sync),
        "namespaces": namespaces,
        "models": models,
    }


def write_summary(summary: dict[str, Any], path: Path) -> Path:
    """Write `summary` as indented JSON to `path` (owner-only), atomically."""
    return write_text_atomically(path, json.dumps(summary, indent=2) + "\n")
