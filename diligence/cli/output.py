"""What the commands print about a pipeline run: one line per namespace, the models built,
the documents downloaded, a wait for another writer, and the one final line of --quiet.

Every line goes to the consoles of :mod:`diligence.cli.base` (stdout for results, stderr
for waits) as plain text: upstream IDs pass :func:`~diligence.safe_text.console_text`,
and nothing is read as rich markup. With ``--quiet`` the per-namespace lines are left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..safe_text import console_text
from ..words import counted
from .base import _quiet, err, out

__all__ = ["final_line", "print_analytics", "print_downloads", "print_sync", "print_waited"]


def final_line(result: Any) -> str:
    """The one line `diligence --quiet sync` prints for a :class:`~diligence.steps.PipelineResult`."""
    sync = result.sync
    line = (
        f"synced {len(sync.namespaces) - len(sync.failed)}/{len(sync.namespaces)} namespaces "
        f"into {sync.warehouse} in {sync.seconds:.1f}s"
    )
    if result.analytics is not None:
        line += f"; models built, analysts' copy: {result.analytics.published}"
    return line


def print_waited(seconds: float, warehouse: Path | str) -> None:
    """On stderr, how long the command waited for another writer of `warehouse` (if it did)."""
    if seconds and not _quiet():
        err.print(f"waited {seconds:.1f}s for another writer of {warehouse} to finish", highlight=False)


def print_sync(result: Any) -> None:
    """One line per namespace of a :class:`~diligence.sync.SyncResult`, then the total and
    the evidence head it sealed."""
    if _quiet() or not any(o.status == "success" for o in result.namespaces):
        return  # --quiet: one final line; nothing loaded: one error line
    for outcome in result.namespaces:
        mark = "ok" if outcome.status == "success" else "FAILED"
        resumed = ""
        if outcome.requests_kept:
            since = f" from {outcome.kept_since.astimezone():%H:%M}" if outcome.kept_since else ""
            resumed = (f"; resumed: {outcome.requests_kept:,} of "
                       f"{counted(outcome.requests_kept + outcome.requests, 'request')} kept{since}")
        written = f", {counted(outcome.versions_written, 'row version')} written" if outcome.status == "success" else ""
        out.print(
            f"{mark:6} {console_text(outcome.namespace_company_id)}: {counted(outcome.requests, 'request')}, "
            f"{counted(outcome.rows, 'row')} received{written}, {counted(outcome.issues, 'sync issue')}, "
            f"{outcome.duration_seconds:.1f}s{resumed}",
            highlight=False,
        )
    selected = f" (only {', '.join(result.resources)})" if getattr(result, "resources", None) else ""
    out.print(
        f"synced {len(result.namespaces) - len(result.failed)}/{len(result.namespaces)} namespaces"
        f"{selected} into {result.warehouse} in {result.seconds:.1f}s",
        highlight=False,
    )
    if getattr(result, "evidence_head", None):
        broken = "; the chain was broken before it (recorded: see `diligence verify`)" \
            if result.evidence_break else ""
        out.print(f"evidence sealed: head {result.evidence_head}{broken}", highlight=False)


def print_downloads(result: Any, folder: Path | None) -> None:
    """The counts of a :class:`~diligence.documents.DownloadSummary`."""
    out.print(
        f"documents: {result.downloaded} downloaded, {result.unchanged} unchanged, "
        f"{result.failed} failed, into {folder}",
        highlight=False,
    )


def print_analytics(result: Any, warehouse: Any) -> None:
    """The models built with their row counts, and when every check passed the analysts'
    copy, or for a lake (`warehouse`'s location) the lines that attach it read-only."""
    out.print(
        f"models built in {result.models.seconds:.2f}s: "
        + ", ".join(f"{table} {rows}" for table, rows in result.models.row_counts.items()),
        highlight=False,
    )
    if not result.failed_checks:
        copy = result.published or "none (a lake: analysts ATTACH it read-only)"
        out.print(f"all data checks passed; analysts' copy: {copy}", highlight=False)
        if warehouse.is_lake:
            from ..warehouse.lake import analyst_attach_sql  # start-up: lake imports DuckDB

            out.print("analysts read the lake in DuckDB 1.5.5 (duckdb shell) with:\n"
                      + analyst_attach_sql(warehouse.location), highlight=False, soft_wrap=True)
