"""`diligence evidence prune`: keep the evidence of the last ``retain_days`` days.

The sealed manifests of syncs (and document downloads, replays) that began before the
cutoff are removed, then every response and table of entries that no kept manifest
names. The newest manifest is always kept, so the chain keeps its head. The prune
itself is sealed into the chain as a manifest (kind ``prune``) that lists each sync it
removed with its hash and the cutoff: ``diligence verify`` then reports a link to a
removed sync, and the rows only those syncs proved, as pruned, not as tampered with.

The warehouse is held for writing meanwhile, so no sync adds a reference to a response
while it is judged unreferenced.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from pipelines.evidence.confined import remove_file
from pipelines.evidence.manifest import read_manifest, sealed_path
from pipelines.evidence.sealing import ManifestWriter, chain_links, folder_lock
from pipelines.evidence.store import ENTRIES, ResponseStore

from ..errors import EvidenceError
from ..evidence.chain import SYNCS, parse_time, read_store
from ..evidence.keeping import file_modes
from ..version import project_version
from ..warehouse import Warehouse

__all__ = ["PruneResult", "prune_evidence"]


@dataclass(frozen=True)
class PruneResult:
    syncs: int
    responses: int
    bytes: int
    before: datetime
    head: str | None


def _remove_unreferenced(store: ResponseStore, referenced: set[str]) -> tuple[int, int]:
    removed = freed = 0
    for stored in store:
        if stored.sha256 not in referenced:
            freed += stored.path.lstat().st_size
            remove_file(store.root, store.parts(stored.sha256))
            removed += 1
    return removed, freed


def prune_evidence(owner: Warehouse, retain_days: float, *, now: datetime | None = None) -> PruneResult:
    """Remove the evidence of syncs older than `retain_days` (see the module docstring)."""
    if retain_days <= 0:
        raise EvidenceError(f"retain_days must be positive, not {retain_days:g}")
    if owner.evidence_bucket is not None:
        raise EvidenceError(f"the evidence store is in {owner.evidence_bucket}: prune it with the "
                            "bucket's own lifecycle rules (responses/ is content-addressed)")
    root = owner.evidence_root
    if root is None or not (root / SYNCS).is_dir():
        raise EvidenceError(f"no evidence store at {root or '(evidence is off)'}: nothing to prune")
    moment = now or datetime.now(timezone.utc)
    before = moment - timedelta(days=retain_days)
    with owner.writing():
        store = read_store(root)
        problems = store.problems()
        if problems:
            raise EvidenceError(f"the evidence chain does not hold ({problems[0]}): run `diligence verify`; "
                                "nothing pruned")
        chain = [m for m in store.ordered() if m.header.get("kind") != "prune"]
        old = [m for m in chain[:-1] if (t := parse_time(m.header.get("started_at"))) is not None and t < before]
        if not old:
            return PruneResult(0, 0, 0, before, store.head[0] if store.head else None)
        gone = {m.sync_id for m in old}
        kept = [m for m in store.sealed + store.unsealed if m.sync_id not in gone]
        writer = ManifestWriter(root / SYNCS, {
            "sync_id": "prune-" + moment.strftime("%Y%m%dT%H%M%S%fZ"), "kind": "prune",
            "started_at": moment.isoformat(), "synced_at": moment.isoformat(), "version": project_version(),
            "before": before.isoformat(),
            "pruned": [[m.sync_id, str((m.seal or {}).get("hash")), m.header.get("synced_at")] for m in old]},
            file_modes())
        sealed = writer.seal()  # first: a prune killed half-way has still said what it removes
        with folder_lock(writer.path):
            for manifest in old:
                remove_file(root, (SYNCS, sealed_path(root / SYNCS, manifest.sync_id).name))
            chain_links(root / SYNCS, save=True, modes=file_modes())
        responses, freed = _remove_unreferenced(
            ResponseStore(root), {e.sha256 for m in kept for e in m.entries})
        itself = read_manifest(sealed_path(root / SYNCS, writer.sync_id))
        _tables, freed_tables = _remove_unreferenced(
            ResponseStore(root, ENTRIES), {m.table for m in [*kept, itself] if m is not None and m.table})
    return PruneResult(len(old), responses, freed + freed_tables, before, sealed.hash)

