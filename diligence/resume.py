"""Resuming an interrupted sync: its manifest, and the namespaces it had committed.

A sync's manifest (:mod:`pipelines.evidence.manifest`) records every
response it read as it arrives, and after each namespace's commit that it was
committed; it is sealed into the evidence chain once the sync ends. What a sync killed
mid-way (or stopped by an error, a full disk) leaves is therefore an unsealed manifest.
The next sync of the same account, base URL, warehouse and ``--select``, within
``resume_within``:

- reads the namespaces that sync had not committed again, answering from its evidence
  the requests it had completed (:class:`pipelines.company_connections.Kept`);
- does not read again the namespaces it had committed (its outcome records and its
  ``sync_runs`` rows say so), so it goes on where the interrupted one stopped;
- seals the interrupted manifest into the chain (as ``interrupted``) before its own.

A sync that *ended* (every namespace recorded, failed ones included) was not
interrupted: the answers of a namespace that failed are kept, the others are read as
usual. ``--restart`` (a flow's ``restart``) starts from zero. Without evidence
(``[evidence] enabled = false``) nothing is kept, so nothing is resumed.
"""

from __future__ import annotations

import logging
import os
import socket
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from pipelines.company_connections import Kept
from pipelines.evidence.manifest import SUFFIX, Manifest, manifests, read_manifest

from .evidence.keeping import manifest_identity
from .warehouse import Warehouse
from .warehouse.lock import process_alive

__all__ = ["ResumePlan", "Unfinished", "plan_resume", "resumable_namespaces", "unfinished_namespaces"]

log = logging.getLogger("diligence.evidence")

#: the kinds of manifests written by syncs (a replay is one too)
SYNC_KINDS = ("sync", "replay")


@dataclass
class ResumePlan:
    """What a new sync goes on from."""

    #: answers it may keep (empty: nothing to resume)
    kept: Kept = field(default_factory=Kept)
    #: namespace -> why it is not read again
    skip: dict[str, str] = field(default_factory=dict)
    #: the interrupted syncs' manifests, sealed before this sync's own
    continued: list[Path] = field(default_factory=list)


def _runs_of(owner: Warehouse, sync_ids: set[str]) -> list[tuple[str, str, str, datetime | None]]:
    """(sync_id, namespace, status, finished_at) of the given syncs in ``raw.sync_runs``."""
    if not sync_ids:
        return []
    placeholders = ", ".join("?" for _ in sync_ids)
    return owner.sync_runs(
        "select sync_id, namespace_company_id, status, finished_at from raw.sync_runs "
        f"where sync_id in ({placeholders})", sorted(sync_ids))


def _running(manifest: Manifest, host: str) -> bool:
    pid = manifest.header.get("pid")
    return manifest.header.get("host") == host and isinstance(pid, int) and (
        pid == os.getpid() or process_alive(pid))


def _manifests(owner: Warehouse) -> list[Manifest]:
    """The manifests of `owner`'s syncs (replays included; not those of document
    downloads or prunes)."""
    root = owner.evidence_root
    found = manifests(root / "syncs", entries=False) if root is not None else []  # sealed: counts only
    return [m for m in found if m.header.get("kind", "sync") in SYNC_KINDS]


def _left_behind(owner: Warehouse, found: list[Manifest] | None = None) -> list[Manifest]:
    """The unsealed manifests of syncs that are not running any more (killed, or stopped
    by an error), oldest first."""
    host = socket.gethostname()
    return [m for m in (found if found is not None else _manifests(owner))
            if not m.sealed and not _running(m, host)]


def _recorded(owner: Warehouse, found: list[Manifest]) -> dict[tuple[str, str], str]:
    """(sync_id, namespace) -> outcome ("success" | "failed") of the syncs of `found`: the
    manifests' own outcome records and ``raw.sync_runs`` (a kill between a commit and
    its outcome record)."""
    recorded = {(m.sync_id, ns): ("success" if status == "committed" else status)
                for m in found for ns, (status, _error) in m.outcomes.items()}
    for sync, ns, status, _finished in _runs_of(owner, {m.sync_id for m in found}):
        recorded[(sync, ns)] = status
    return recorded


def _set_aside_damaged(owner: Warehouse) -> None:
    """An unsealed manifest whose header cannot be read is renamed ``<name>.damaged``
    (kept, but neither resumed nor sealed), with one line."""
    root = owner.evidence_root
    folder = root / "syncs" if root is not None else None
    for path in sorted(folder.glob(f"*{SUFFIX}")) if folder is not None and folder.is_dir() else []:
        if read_manifest(path) is None:
            aside = path.with_name(f"{path.name}.damaged")
            path.rename(aside)
            log.warning("the manifest %s cannot be read (its header is damaged): it is kept aside as %s, "
                        "and its namespaces are read afresh", path, aside.name)


def plan_resume(owner: Warehouse, settings: Any, *, started_at: datetime,
                resources: tuple[str, ...] | None, restart: bool = False) -> ResumePlan:
    """What a new sync of `owner` with `settings` (resolved source settings) goes on from.

    For each namespace, the latest sync (within ``resume_within``, of the same identity)
    that read it decides: if it ended before recording the namespace (interrupted), or
    recorded it as failed, its answers are kept; if it committed it, nothing is, and if
    that sync was interrupted the namespace is not read again."""
    _set_aside_damaged(owner)
    found = _manifests(owner)
    host = socket.gethostname()
    plan = ResumePlan(continued=[m.path for m in _left_behind(owner, found)])
    if restart or settings.resume_within <= 0 or not found:
        return plan
    identity = manifest_identity(owner, settings, resources)
    recent: list[Manifest] = []
    for manifest in found:
        if _running(manifest, host) and not manifest.sealed:
            continue
        since = manifest.started_at()
        if since is None or started_at - since > timedelta(seconds=settings.resume_within):
            continue
        reason = identity.mismatch(manifest.header)
        if reason is not None:
            if not manifest.sealed:
                log.warning("the evidence of the interrupted sync %s is not resumed: %s; its "
                            "namespaces are read afresh", manifest.sync_id, reason)
            continue
        recent.append(manifest)
    recorded = _recorded(owner, recent)
    latest: dict[str, Manifest] = {}
    for manifest in recent:  # oldest first: the latest reader of a namespace wins
        for ns in manifest.namespaces():
            if ns is not None:
                latest[ns] = manifest
    usable: dict[str, set[str]] = {}
    for ns, manifest in latest.items():
        outcome = recorded.get((manifest.sync_id, ns))
        if outcome in (None, "failed"):
            usable.setdefault(manifest.sync_id, set()).add(ns)
        elif not manifest.sealed and any(
                (manifest.sync_id, other) not in recorded for other, m in latest.items() if m is manifest):
            plan.skip[ns] = f"committed by the interrupted sync {manifest.sync_id} (--restart reads it again)"
    plan.kept = Kept.of([(m, usable[m.sync_id]) for m in recent if m.sync_id in usable])
    return plan


@dataclass(frozen=True)
class Unfinished:
    """A namespace whose last sync attempt ended before it committed or recorded it: a
    sync killed or stopped by an error (a full disk) during its fetch or its load."""

    namespace: str
    sync_id: str
    requests_kept: int


def unfinished_namespaces(owner: Warehouse) -> list[Unfinished]:
    """The namespaces whose last attempt left work that is not committed: read by an
    unsealed manifest that recorded no outcome for them (no outcome record, no
    ``raw.sync_runs`` row). Nothing of such a namespace is in `raw` from that attempt
    (each namespace commits whole), but models built now would show it as if that
    attempt had not happened: rerun the sync."""
    host = socket.gethostname()
    found = [m for m in _manifests(owner) if m.sealed or not _running(m, host)]
    latest: dict[str, tuple[Manifest, int]] = {}
    for manifest in found:  # oldest first: the latest reader of a namespace decides
        for ns, count in manifest.namespaces().items():
            if ns is not None:
                latest[ns] = (manifest, count)
    # only a latest reader without an outcome record asks the warehouse (a kill between a
    # commit and its record): a sync running now keeps the file, and is not asked about
    candidates = {m.sync_id: m for m, _count in latest.values()
                  if any(ns not in m.outcomes for ns, (other, _c) in latest.items() if other is m)}
    recorded = _recorded(owner, list(candidates.values())) if candidates else {}
    return [Unfinished(ns, manifest.sync_id, count) for ns, (manifest, count) in sorted(latest.items())
            if ns not in manifest.outcomes and (manifest.sync_id, ns) not in recorded]


@dataclass(frozen=True)
class Resumable:
    """What ``diligence status`` shows of a namespace an interrupted sync left."""

    namespace: str
    requests_kept: int
    since: datetime | None


def resumable_namespaces(owner: Warehouse) -> list[Resumable]:
    """The namespaces the next sync would go on from, oldest first."""
    started = {m.sync_id: m.started_at() for m in _manifests(owner)}
    found = [Resumable(u.namespace, u.requests_kept, started.get(u.sync_id))
             for u in unfinished_namespaces(owner)]
    return sorted(found, key=lambda j: (j.since is None, j.since or datetime.min, j.namespace))
