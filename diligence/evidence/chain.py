"""The chain of sealed manifests of an evidence store, read whole and checked.

Each sealed manifest names the hash of the one sealed before it (``seal.previous``) and
``syncs/HEAD`` names the last; :func:`read_store` reads them all, :meth:`Store.problems`
says where the chain does not hold: a manifest that does not hash to its seal (edited),
whose table of entries is missing or altered, a link to a manifest that is missing
(removed) and was not pruned, a second start, a fork, or a ``HEAD`` that names no
manifest. :meth:`Store.ordered` is the chain from its first kept manifest to the head.

A prune (``diligence evidence prune``) is itself a sealed manifest (kind ``prune``)
listing the syncs it removed with their hashes; a link to one of those is "pruned", not
missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pipelines.company_connections.manifest import (
    SEALED_SUFFIX,
    Manifest,
    chain_head,
    expected_hash,
    manifest_paths,
    read_manifest,
)
from pipelines.company_connections.store import ResponseStore

__all__ = ["Store", "evidence_summary", "parse_time", "read_store"]

SYNCS = "syncs"


def parse_time(value: Any) -> datetime | None:
    """An ISO timestamp of a manifest (naive: UTC), or None."""
    try:
        when = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


@dataclass
class Store:
    """An evidence store as read from disk."""

    root: Path
    #: every readable sealed manifest, by sync id order
    sealed: list[Manifest] = field(default_factory=list)
    #: manifests not sealed yet (a sync running, or one that was interrupted)
    unsealed: list[Manifest] = field(default_factory=list)
    #: sealed manifest files that could not be read at all
    unreadable: list[Path] = field(default_factory=list)
    #: (hash, sync_id) of HEAD, or None
    head: tuple[str, str] | None = None
    #: hash -> sync id of the syncs a prune removed, and the latest prune's cutoff
    pruned: dict[str, str] = field(default_factory=dict)
    pruned_before: datetime | None = None

    @property
    def responses(self) -> ResponseStore:
        return ResponseStore(self.root)

    @property
    def by_hash(self) -> dict[str, Manifest]:
        return {str(m.seal["hash"]): m for m in self.sealed if m.seal is not None}

    def syncs(self) -> list[Manifest]:
        """The sealed manifests of syncs, document downloads and replays (not prunes)."""
        return [m for m in self.sealed if m.header.get("kind") != "prune"]

    def problems(self) -> list[str]:
        """Where the chain does not hold, one line each (empty: it holds)."""
        problems = [f"manifest {path.name} is not readable" for path in self.unreadable]
        by_hash = self.by_hash
        followers: dict[str | None, list[str]] = {}
        for manifest in self.sealed:
            seal = manifest.seal or {}
            name = _name(manifest)
            if manifest.damaged:
                problems.append(f"{name}: {manifest.damaged}")
            elif expected_hash(manifest) != seal.get("hash"):
                problems.append(f"{name} was edited: its content does not hash to its seal")
            previous = seal.get("previous")
            followers.setdefault(previous, []).append(manifest.sync_id)
            if previous is not None and previous not in by_hash and previous not in self.pruned:
                recorded = f" (its seal records the break: {seal['break']})" if seal.get("break") else ""
                problems.append(f"the manifest sealed before {manifest.sync_id} is missing (hash {previous[:12]}){recorded}")
        for previous, syncs in followers.items():
            if previous is None and len(syncs) > 1:
                problems.append(f"syncs {', '.join(syncs)} each start a chain of their own")
            elif previous is not None and len(syncs) > 1:
                problems.append(f"syncs {', '.join(syncs)} each follow the same manifest ({previous[:12]}): "
                                "the chain forks")
        if self.head is None:
            if self.sealed:
                problems.append(f"{self.root / SYNCS / 'HEAD'} is missing")
        elif self.head[0] not in by_hash:
            problems.append(f"HEAD names sync {self.head[1]} ({self.head[0][:12]}), whose manifest is missing")
        return problems

    def summary(self) -> dict[str, Any]:
        """What ``diligence status`` shows of the store (its ``--json`` key ``evidence``):
        where it is, its head, how many syncs are sealed, responses kept, bytes on disk."""
        responses, _ = self.responses.size()
        size = sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file()) if self.root.is_dir() else 0
        return {"path": str(self.root), "head": self.head[0] if self.head else None,
                "syncs": len(self.syncs()), "responses": responses, "bytes": size}

    def ordered(self) -> list[Manifest]:
        """The chain from its first kept manifest to the head (walking back from HEAD)."""
        by_hash = self.by_hash
        chain: list[Manifest] = []
        current = by_hash.get(self.head[0]) if self.head else None
        seen: set[str] = set()
        while current is not None and current.sync_id not in seen:
            seen.add(current.sync_id)
            chain.append(current)
            previous = (current.seal or {}).get("previous")
            current = by_hash.get(previous) if previous else None
        return list(reversed(chain))


def _name(manifest: Manifest) -> str:
    kind = manifest.header.get("kind", "sync")
    return f"the manifest of {'sync' if kind in ('sync', 'replay') else kind} {manifest.sync_id}"


def evidence_summary(owner: Any) -> dict[str, Any] | None:
    """The ``evidence`` of ``diligence status`` and of a flow run's summary for the
    warehouse `owner`: path, head, syncs, responses, bytes (None: no evidence kept)."""
    root = owner.evidence_root
    return read_store(root, entries=False).summary() if root is not None else None


def read_store(root: Path, *, entries: bool = True) -> Store:
    """Every manifest of the evidence store at `root` (`entries` False: the sealed ones
    without their entries, enough for counts and the chain's links)."""
    store = Store(Path(root), head=chain_head(Path(root) / SYNCS))
    for path in manifest_paths(store.root / SYNCS):
        manifest = read_manifest(path, entries=entries)
        sealed = path.name.endswith(SEALED_SUFFIX)
        if manifest is None:
            if sealed:
                store.unreadable.append(path)
            continue
        (store.sealed if manifest.sealed else store.unsealed).append(manifest)
    for manifest in store.sealed:
        if manifest.header.get("kind") == "prune":
            for sync_id, digest, _synced_at in manifest.header.get("pruned", []):
                store.pruned[str(digest)] = str(sync_id)
            before = parse_time(manifest.header.get("before"))
            if before is not None and (store.pruned_before is None or before > store.pruned_before):
                store.pruned_before = before
    return store
