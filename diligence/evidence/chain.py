"""The chain of sealed manifests of an evidence store, read whole and checked.

Each sealed manifest names the hash of the one sealed before it (``seal.previous``);
the last seal is the one no other names (:attr:`Store.head`), and ``syncs/HEAD`` is a
cache of it. :func:`read_store` reads them all, :meth:`Store.problems` says where the
chain does not hold: a manifest that cannot be read (and why), one that does not hash to
its seal (edited), whose table of entries is missing or altered, a link to a manifest
that is missing (removed) and was not pruned, a second start, a fork, a ``HEAD`` that
is not the last seal, and anything in ``syncs/`` the store's layout does not allow (a
link, a FIFO, a stray name). :meth:`Store.ordered` is the chain from its first kept
manifest to the last seal.

A prune (``diligence evidence prune``) is itself a sealed manifest (kind ``prune``)
listing the syncs it removed with their hashes; a link to one of those is "pruned", not
missing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pipelines.evidence.confined import is_sync_id, listing, shown
from pipelines.evidence.manifest import (
    CHAIN,
    HEAD,
    SEALED_SUFFIX,
    SUFFIX,
    Manifest,
    load_manifest,
    manifest_paths,
)
from pipelines.evidence.sealing import Link, chain_links, expected_hash, read_head
from pipelines.evidence.store import ENTRIES, RESPONSES, ResponseStore

__all__ = ["Store", "evidence_summary", "parse_time", "read_store", "sealed_after"]

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
    #: sealed manifest files that could not be read at all, and why
    unreadable: list[tuple[Path, str]] = field(default_factory=list)
    #: what ``syncs/HEAD`` names: (hash, sync_id), or why it names none
    head_file: tuple[str, str] | str = "missing"
    #: entries of the store the layout does not allow, one line each
    strays: list[str] = field(default_factory=list)
    #: hash -> sync id of the syncs a prune removed, and the latest prune's cutoff
    pruned: dict[str, str] = field(default_factory=dict)
    pruned_before: datetime | None = None
    #: when the first sync the chain ever sealed began (pruned ones included)
    began: datetime | None = None
    #: the seal a verified checkpoint covers: its manifest is read without its entries
    #: and taken as it is, with the ones before it (see :func:`read_store`'s `after`)
    trusted: str | None = None

    @property
    def responses(self) -> ResponseStore:
        return ResponseStore(self.root)

    @property
    def by_hash(self) -> dict[str, Manifest]:
        return {str(m.seal["hash"]): m for m in self.sealed if m.seal is not None}

    def ends(self) -> list[Manifest]:
        """The sealed manifests no other names as previous."""
        named = {(m.seal or {}).get("previous") for m in self.sealed}
        return [m for m in self.sealed if (m.seal or {}).get("hash") not in named]

    @property
    def head(self) -> tuple[str, str] | None:
        """(hash, sync_id) of the last seal: the sealed manifest no other names as
        previous (of several, the one HEAD names, else the latest sealed); None: none."""
        ends = self.ends() or self.sealed
        if not ends:
            return None
        cached = self.head_file[0] if isinstance(self.head_file, tuple) else None
        last = next((m for m in ends if (m.seal or {}).get("hash") == cached), None) or max(
            ends, key=lambda m: (str((m.seal or {}).get("sealed_at")), m.sync_id))
        return str((last.seal or {})["hash"]), last.sync_id

    def syncs(self) -> list[Manifest]:
        """The sealed manifests of syncs, document downloads and replays (not prunes)."""
        return [m for m in self.sealed if m.header.get("kind") != "prune"]

    def problems(self) -> list[str]:
        """Where the chain does not hold, one line each (empty: it holds)."""
        problems = [*self.strays, *(f"manifest {path.name} is not readable: {why}" for path, why in self.unreadable)]
        by_hash = self.by_hash
        followers: dict[str | None, list[str]] = {}
        for manifest in self.sealed:
            seal = manifest.seal or {}
            name = _name(manifest)
            if seal.get("hash") == self.trusted and self.trusted is not None:
                continue
            if manifest.damaged:
                problems.append(f"{name}: {manifest.damaged}")
            elif expected_hash(manifest) != seal.get("hash"):
                problems.append(f"{name} was edited: its content does not hash to its seal")
            previous = seal.get("previous")
            followers.setdefault(previous, []).append(manifest.sync_id)
            recorded = f" (its seal records the break: {seal['break']})" if seal.get("break") else ""
            if previous is not None and previous not in by_hash and previous not in self.pruned:
                problems.append(f"the manifest sealed before {manifest.sync_id} is missing (hash {previous[:12]}){recorded}")
            elif recorded:
                problems.append(f"{name} was sealed on a broken chain{recorded}")
        for previous, syncs in followers.items():
            if previous is None and len(syncs) > 1:
                problems.append(f"syncs {', '.join(syncs)} each start a chain of their own")
            elif previous is not None and len(syncs) > 1:
                problems.append(f"syncs {', '.join(syncs)} each follow the same manifest ({previous[:12]}): "
                                "the chain forks")
        problems.extend(self._head_problems(by_hash))
        return problems

    def _head_problems(self, by_hash: dict[str, Manifest]) -> list[str]:
        head = self.head_file
        if isinstance(head, str):
            if head == "missing":
                return [f"{self.root / SYNCS / HEAD} is missing"] if self.sealed else []
            return [f"{self.root / SYNCS / HEAD} is {head}"]
        if head[0] not in by_hash:
            return [f"HEAD names sync {head[1]} ({head[0][:12]}), whose manifest is missing"]
        last = self.head
        if last is not None and last[0] != head[0]:
            return [f"HEAD names sync {head[1]} ({head[0][:12]}), which is not the last seal: sync "
                    f"{last[1]} ({last[0][:12]}) is sealed after it"]
        return []

    def summary(self) -> dict[str, Any]:
        """What ``diligence status`` shows of the store (its ``--json`` key ``evidence``):
        where it is, its head, how many syncs are sealed, responses kept, bytes on disk."""
        return _summary(self.root)

    def ordered(self) -> list[Manifest]:
        """The chain from its first kept manifest to the last seal (walking back)."""
        by_hash = self.by_hash
        chain: list[Manifest] = []
        head = self.head
        current = by_hash.get(head[0]) if head else None
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


def _summary(root: Path) -> dict[str, Any]:
    folder = root / SYNCS
    try:
        links = chain_links(folder)
    except OSError:
        return {"path": str(root), "head": None, "syncs": 0, "responses": 0, "bytes": 0}
    ends = links.ends()
    head = read_head(folder)
    last = next((k for k in ends if isinstance(head, tuple) and k.hash == head[0]), None) or (
        max(ends, key=lambda k: (k.sealed_at, k.sync_id)) if ends else None)
    responses, _ = ResponseStore(root).size()
    size = sum(p.lstat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink()) \
        if root.is_dir() else 0
    return {"path": str(root), "head": last.hash if last else None,
            "syncs": sum(1 for k in links.links if k.kind != "prune"), "responses": responses, "bytes": size}


def evidence_summary(owner: Any) -> dict[str, Any] | None:
    """The ``evidence`` of ``diligence status`` and of a flow run's summary for the
    warehouse `owner`: path, head, syncs, responses, bytes (None: no evidence kept)."""
    root = owner.evidence_root
    return _summary(root) if root is not None else None


#: what ``syncs/`` may hold besides manifests: the caches, a killed write's temporary
#: file, a manifest set aside as damaged by a resume
_SYNCS_FILES = (HEAD, CHAIN, "VERIFIED")


def _strays(root: Path) -> list[str]:
    """The entries of the store's own folders that its layout does not allow."""
    strays = []
    for name, kind in listing(root):
        if name in (SYNCS, RESPONSES, ENTRIES) and kind != "folder":
            strays.append(f"{name} is {kind if kind != 'file' else 'a file'}, not a folder: not read")
    for name, kind in listing(root, (SYNCS,)) if (root / SYNCS).is_dir() and not (root / SYNCS).is_symlink() else []:
        stem = name.removesuffix(".damaged").removesuffix(SEALED_SUFFIX).removesuffix(SUFFIX)
        allowed = name in _SYNCS_FILES or is_sync_id(stem) or (name.startswith(".") and name.endswith(".tmp"))
        if kind != "file":
            strays.append(f"{SYNCS}/{shown(name)} is {kind}: not read")
        elif not allowed:
            strays.append(f"{SYNCS}/{shown(name)} is a file whose name the evidence store's layout does not allow")
    return strays


def sealed_after(root: Path, seal: str) -> set[str] | None:
    """The sync ids of the manifests sealed after `seal` on the way to each last seal,
    from the chain's links (``CHAIN``, and the manifests it does not list yet); None when
    `seal` is not in the chain before every last seal."""
    links = chain_links(Path(root) / SYNCS)
    by_hash = {link.hash: link for link in links.links}
    if seal not in by_hash:
        return None
    after: set[str] = set()
    for end in links.ends():
        current: Link | None = end
        while current is not None and current.hash != seal:
            after.add(current.sync_id)
            current = by_hash.get(current.previous) if current.previous else None
        if current is None:
            return None
    return after


def read_store(root: Path, *, entries: bool = True, after: str | None = None) -> Store:
    """Every manifest of the evidence store at `root` (`entries` False: the sealed ones
    without their entries, enough for counts and the chain's links). With `after` (a
    seal, see :func:`sealed_after`) only the manifests sealed after it, and its own
    without its entries (:attr:`Store.trusted`)."""
    store = Store(Path(root), head_file=read_head(Path(root) / SYNCS), strays=_strays(Path(root)), trusted=after)
    wanted = sealed_after(store.root, after) if after is not None else None
    trusted = next((k.sync_id for k in chain_links(store.root / SYNCS).links if k.hash == after), None)
    try:
        paths = manifest_paths(store.root / SYNCS)
    except OSError as exc:
        store.strays.append(str(exc))
        paths = []
    for path in paths:
        stem = path.name.removesuffix(SEALED_SUFFIX)
        if wanted is not None and path.name.endswith(SEALED_SUFFIX) and stem not in wanted and stem != trusted:
            continue
        try:
            manifest = load_manifest(path, entries=entries and stem != trusted)
        except OSError as exc:
            if path.name.endswith(SEALED_SUFFIX):
                store.unreadable.append((path, str(exc).removeprefix(f"{path.name}: ")))
            continue
        (store.sealed if manifest.sealed else store.unsealed).append(manifest)
    began = [t for m in store.syncs() if (t := parse_time(m.header.get("started_at"))) is not None]
    for manifest in store.sealed:
        if manifest.header.get("kind") == "prune":
            for item in manifest.header.get("pruned") or []:
                sync_id, digest, synced_at = (list(item) + [None, None, None])[:3]
                store.pruned[str(digest)] = str(sync_id)
                if (at := parse_time(synced_at)) is not None:
                    began.append(at)
            before = parse_time(manifest.header.get("before"))
            if before is not None and (store.pruned_before is None or before > store.pruned_before):
                store.pruned_before = before
    store.began = min(began, default=None)
    return store
