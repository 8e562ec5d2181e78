"""Resuming an interrupted sync: its journals, and the namespaces it had committed.

A sync keeps each namespace's completed requests in a journal (see
:mod:`pipelines.company_connections.journal`) under the warehouse's pipeline files,
and deletes it once the namespace is committed. What a sync killed mid-way leaves is
therefore exactly the namespaces it had not committed. The next sync (same account,
base URL and ``--select``, within ``resume_within``):

- reads those namespaces again, asking the service only what their journals lack;
- does not read again the namespaces the interrupted sync had committed (its
  ``sync_runs`` say so), so it goes on where the interrupted one stopped.

A sync that *ended* (every namespace recorded in ``sync_runs``, failed ones included)
was not interrupted: the journal of a namespace that failed is resumed, and the
others are read as usual. ``--restart`` (a flow's ``restart``) starts from zero.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pipelines.company_connections import JournalBook, JournalIdentity, journal_summaries

from .warehouse import Warehouse

__all__ = ["ResumePlan", "Unfinished", "journal_dir", "plan_resume", "resumable_journals",
           "unfinished_namespaces"]


def journal_dir(owner: Warehouse) -> Path:
    """Where `owner`'s syncs keep their request journals (owner-only)."""
    return owner.pipelines_root / "journal"


@dataclass
class ResumePlan:
    """The journals of one sync and the namespaces it does not read again."""

    #: a pipelines.company_connections.JournalBook (None: `resume_within` is 0)
    journals: Any
    #: namespace -> why it is not read again
    skip: dict[str, str]


def _runs_of(owner: Warehouse, sync_ids: set[str]) -> list[tuple[str, str, str, datetime | None]]:
    """(sync_id, namespace, status, finished_at) of the given syncs in ``raw.sync_runs``."""
    if not sync_ids:
        return []
    placeholders = ", ".join("?" for _ in sync_ids)
    return owner.sync_runs(
        "select sync_id, namespace_company_id, status, finished_at from raw.sync_runs "
        f"where sync_id in ({placeholders})", sorted(sync_ids))


def plan_resume(owner: Warehouse, settings: Any, *, sync_id: str, started_at: datetime,
                resources: tuple[str, ...] | None, restart: bool = False) -> ResumePlan:
    """The journals of a new sync of `owner` with `settings` (resolved source settings),
    and the namespaces an interrupted sync of the same kind had committed."""
    if settings.resume_within <= 0:  # resuming is off: nothing is journaled
        return ResumePlan(None, {})
    warehouse = str(owner.path.resolve()) if owner.path is not None else owner.display()
    identity = JournalIdentity.of(settings.base_url, settings.email, resources, warehouse)
    book = JournalBook(journal_dir(owner), identity, sync_id=sync_id, started_at=started_at,
                       resume_within=settings.resume_within, restart=restart)
    continued = book.interrupted_syncs()
    if not continued:
        return ResumePlan(book, {})
    runs = _runs_of(owner, set().union(*continued.values()))
    recorded = {(sync, ns) for sync, ns, _status, _finished in runs}
    committed = {(sync, ns) for sync, ns, status, _finished in runs if status == "success"}
    for ns, syncs in list(continued.items()):
        if any((sync, ns) in committed for sync in syncs):
            # killed between the namespace's commit and its journal's deletion: done
            book.forget(ns)
            del continued[ns]
    # A sync was interrupted when a namespace it journaled has no row of it: it never
    # recorded that namespace's outcome.
    interrupted = {sync for ns, syncs in continued.items() for sync in syncs if (sync, ns) not in recorded}
    skip: dict[str, str] = {}
    for sync, ns, status, finished in sorted(runs, key=lambda row: str(row[3])):
        if sync in interrupted and status == "success" and ns not in continued:
            when = f" at {finished:%Y-%m-%d %H:%M}" if finished is not None else ""
            skip[ns] = f"committed{when} by the interrupted sync {sync} (--restart reads it again)"
    return ResumePlan(book, skip)


@dataclass(frozen=True)
class Unfinished:
    """A namespace whose last sync attempt ended before it committed or recorded it: a
    sync killed or stopped by an error (a full disk) during its fetch or its load."""

    namespace: str
    sync_id: str
    requests_kept: int


def unfinished_namespaces(owner: Warehouse) -> list[Unfinished]:
    """The namespaces whose last attempt left work that is not committed: a journal whose
    latest sync recorded no outcome (no ``raw.sync_runs`` row) for its namespace. Nothing
    of such a namespace is in `raw` from that attempt (each namespace commits whole), but
    models built now would show it as fresher than its last attempt: rerun the sync."""
    journals = journal_summaries(journal_dir(owner))
    if not journals:
        return []
    latest = {summary.namespace: summary.sync_ids[-1] for summary in journals}
    recorded = {(sync, ns) for sync, ns, _status, _finished in _runs_of(owner, set(latest.values()))}
    return [Unfinished(summary.namespace, latest[summary.namespace], summary.kept)
            for summary in journals if (latest[summary.namespace], summary.namespace) not in recorded]


@dataclass(frozen=True)
class ResumableJournal:
    """A journal ``diligence status`` shows: a namespace an interrupted sync left."""

    namespace: str
    requests_kept: int
    since: datetime | None


def resumable_journals(owner: Warehouse) -> list[ResumableJournal]:
    """The journals under `owner`'s pipeline files, oldest first."""
    found = [ResumableJournal(s.namespace, s.kept, s.since) for s in journal_summaries(journal_dir(owner))]
    return sorted(found, key=lambda j: (j.since is None, j.since or datetime.min, j.namespace))
