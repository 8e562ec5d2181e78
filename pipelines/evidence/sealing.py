"""Writing a sync's manifest, and sealing it into the chain after the last seal.

A :class:`ManifestWriter` appends a sync's records as its answers arrive (see
:mod:`.manifest` for the format). At the end :func:`seal` puts the entries in canonical
order, keeps their table in the store's ``entries``, and writes
``<sync_id>.manifest.gz`` whose hash (:mod:`.merkle`) covers the header, the outcomes
with their row counts, the entries' Merkle root and the hash of **the last seal**.

The last seal is derived from the sealed manifests themselves: the one that no other
names as previous (:func:`last_seal`). ``syncs/HEAD`` and ``syncs/CHAIN`` are caches of
it: HEAD names it, CHAIN lists every sealed manifest's link (hash, previous, sync id,
kind, seal time) so that finding the last seal reads only the manifests CHAIN does not
list yet. A seal writes, each step durable before the next: the entries' table, the
sealed manifest (written, fsynced, renamed into place), CHAIN, then HEAD, and removes
the records last. A process killed after any step leaves a chain the next seal extends:

* before the rename: the manifest is still unsealed, and is sealed by the next sync
  (as ``interrupted``); a temporary file it left is removed under the lock;
* after the rename: the manifest is sealed; CHAIN does not list it yet, so the next
  seal reads it, finds it is the last seal, and extends it; HEAD is put right;
* after HEAD: only the records are left, beside their sealed twin, which wins.

A chain that cannot be followed is not repaired: a fork (two manifests naming the same
previous one), a last manifest that was edited or whose entries are damaged, or a
manifest CHAIN lists that is gone (removed, not pruned). The new manifest records that
break in its seal (its hash covers it) and the break is logged. Sealing is serialised
by a lock (``flock``) on the store's ``syncs`` folder itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from .confined import (
    check_sync_id,
    is_sha256,
    is_sync_id,
    listing,
    read_file,
    remove_file,
    write_file,
)
from .manifest import (
    CHAIN,
    HEAD,
    MANIFEST_VERSION,
    SEALED_SUFFIX,
    SUFFIX,
    Entry,
    Manifest,
    RowCounts,
    encode,
    load_manifest,
    read_manifest,
    sealed_path,
)
from .merkle import canonical, content_digest, leaves, manifest_hash, merkle_root
from .store import ENTRIES, FileModes, ResponseStore, make_folder, new_file

__all__ = [
    "ChainLock",
    "Link",
    "ManifestWriter",
    "Sealed",
    "chain_links",
    "expected_hash",
    "folder_lock",
    "last_seal",
    "read_head",
    "seal",
]

logger = logging.getLogger("diligence.evidence")

#: the most bytes HEAD and CHAIN may hold (CHAIN: a million seals)
_HEAD_BYTES = 256
_CHAIN_BYTES = 256 << 20


class ManifestWriter:
    """The manifest a sync writes (append-only, thread-safe), sealed at its end."""

    def __init__(self, folder: Path, header: dict[str, Any], modes: FileModes | None = None,
                 chain_lock: ChainLock | None = None) -> None:
        self.modes = modes or FileModes()
        #: held while a manifest of this store is sealed (see :func:`seal`)
        self.chain_lock = chain_lock or folder_lock
        self.sync_id = check_sync_id(header["sync_id"])
        make_folder(folder, self.modes)
        self.folder = folder
        self.path = folder / f"{self.sync_id}{SUFFIX}"
        self._lock = threading.Lock()
        self._fd = new_file(self.path, self.modes, append=True)
        self.entries = 0
        self._append({"manifest": MANIFEST_VERSION, "pid": os.getpid(), "host": socket.gethostname(),
                      **header})

    def _append(self, payload: Any) -> None:
        data = encode(payload)
        with self._lock:
            try:
                os.write(self._fd, data)
            except OSError as exc:  # e.g. a full disk: say which file
                raise OSError(exc.errno, exc.strerror, str(self.path)) from None

    def entry(self, entry: Entry) -> None:
        self._append(entry.record())
        self.entries += 1

    def outcome(self, namespace: str, status: str, error: str | None = None,
                rows: RowCounts | None = None) -> None:
        """Record that `namespace` was committed (with the row versions the commit
        inserted and retired per table, `rows`), or failed (its previous data kept)."""
        self._append(["N", namespace, status, error, *([rows] if rows is not None else [])])

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = -1

    def seal(self, how: str = "complete") -> Sealed:
        """Seal this manifest into the chain (the new last seal)."""
        self.close()
        return seal(self.path, how, self.modes, lock=self.chain_lock)


#: What :func:`seal` holds while it finds the last seal and writes the new one: given
#: the manifest sealed, a context manager (default :func:`folder_lock`; a store kept in
#: a bucket also takes the bucket's lock, see :mod:`diligence.evidence.bucket`).
ChainLock = Callable[[Path], AbstractContextManager[None]]


@contextlib.contextmanager
def folder_lock(manifest: Path) -> Iterator[None]:
    """Held while a manifest is sealed: an exclusive ``flock`` on its folder itself (no
    lock file is left behind; the folder is not reached through a link)."""
    fd = os.open(manifest.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


# -- the chain's links -----------------------------------------------------------------
@dataclass(frozen=True)
class Link:
    """A sealed manifest's place in the chain."""

    hash: str
    previous: str | None
    sync_id: str
    kind: str
    sealed_at: str

    def line(self) -> str:
        return f"{self.hash} {self.previous or '-'} {self.sync_id} {self.kind} {self.sealed_at}"

    @classmethod
    def parse(cls, line: str) -> Link | None:
        words = line.split()
        if len(words) != 5 or not is_sha256(words[0]) or not (words[1] == "-" or is_sha256(words[1])) \
                or not is_sync_id(words[2]):
            return None
        return cls(words[0], None if words[1] == "-" else words[1], words[2], words[3], words[4])

    @classmethod
    def of(cls, manifest: Manifest) -> Link:
        seal = manifest.seal or {}
        return cls(str(seal["hash"]), seal.get("previous"), manifest.sync_id,
                   str(manifest.header.get("kind", "sync")), str(seal.get("sealed_at", "")))


@dataclass
class Links:
    """The links of a store's sealed manifests, and the ones its CHAIN lists whose
    manifest is gone."""

    links: list[Link]
    gone: list[Link]

    def ends(self) -> list[Link]:
        """The links no other names as previous."""
        named = {link.previous for link in self.links}
        return [link for link in self.links if link.hash not in named]


def _cached(folder: Path) -> dict[str, Link]:
    try:
        text = read_file(folder.parent, (folder.name, CHAIN), _CHAIN_BYTES).decode("ascii", "replace")
    except OSError:
        return {}
    found = (Link.parse(line) for line in text.splitlines())
    return {link.sync_id: link for link in found if link is not None}


def chain_links(folder: Path, *, save: bool = False, modes: FileModes | None = None) -> Links:
    """The links of the sealed manifests in the store's `folder` (``syncs``): those
    ``CHAIN`` lists, and, read from its file, each sealed manifest it does not list yet
    (unreadable ones are left out: ``diligence verify`` names them). With `save` (under
    the chain's lock), ``CHAIN`` is written again if it was not up to date."""
    cached = _cached(folder)
    present = [name.removesuffix(SEALED_SUFFIX) for name, kind in listing(folder.parent, (folder.name,))
               if kind == "file" and name.endswith(SEALED_SUFFIX)
               and is_sync_id(name.removesuffix(SEALED_SUFFIX))]
    links: list[Link] = []
    changed = False
    for sync_id in present:
        link = cached.get(sync_id)
        if link is None:
            manifest = read_manifest(sealed_path(folder, sync_id), entries=False)
            if manifest is None or manifest.seal is None:
                continue
            link, changed = Link.of(manifest), True
        links.append(link)
    gone = [link for sync_id, link in cached.items() if sync_id not in set(present)]
    if save and (changed or gone or not cached and links):
        _write_chain(folder, links, modes or FileModes())
    return Links(links, gone)


def _write_chain(folder: Path, links: list[Link], modes: FileModes) -> None:
    text = "".join(f"{link.line()}\n" for link in sorted(links, key=lambda k: (k.sealed_at, k.sync_id)))
    write_file(folder.parent, (folder.name, CHAIN), text.encode(), mode=modes.file, folder_mode=modes.folder,
               sync=True)


def read_head(folder: Path) -> tuple[str, str] | str:
    """(hash, sync_id) that ``syncs/HEAD`` names, or why it names none (``missing``,
    or what is wrong with it)."""
    try:
        text = read_file(folder.parent, (folder.name, HEAD), _HEAD_BYTES).decode("ascii", "replace")
    except FileNotFoundError:
        return "missing"
    except OSError as exc:
        return f"not readable ({exc})"
    words = text.split()
    if not words:
        return "empty: it names no manifest"
    if len(words) != 2 or not is_sha256(words[0]) or not is_sync_id(words[1]):
        return f"not a head (it holds {text.strip()[:60]!r})"
    return words[0], words[1]


def expected_hash(manifest: Manifest) -> str:
    """What a sealed manifest's hash must be, recomputed from its content."""
    assert manifest.seal is not None
    seal = manifest.seal
    content = content_digest(manifest.header, manifest.outcome_records(), str(seal.get("how")), seal.get("break"))
    return manifest_hash(seal.get("previous"), content, merkle_root(leaves(manifest.entries)))


def last_seal(folder: Path, links: Links) -> tuple[Link | None, str | None]:
    """The chain's last seal (the sealed manifest no other names as previous), and why
    the chain cannot be followed from it (None: it can): a fork, a manifest that CHAIN
    lists and that is gone, a HEAD naming a manifest that is not there, or a last
    manifest edited or damaged. Reads the last manifest whole (no other)."""
    ends = links.ends()
    head = read_head(folder)
    if not links.links:
        if isinstance(head, tuple):
            return None, f"HEAD names sync {head[1]} ({head[0][:12]}), whose manifest is missing"
        return None, None
    if len(ends) == 1:
        last, problem = ends[0], None
    else:
        cached = head[0] if isinstance(head, tuple) else None
        last = next((link for link in ends if link.hash == cached), None) or max(
            ends or links.links, key=lambda k: (k.sealed_at, k.sync_id))
        problem = (f"the chain forks: syncs {', '.join(sorted(k.sync_id for k in ends))} each end a branch"
                   if ends else "the chain has no last seal: its links go round")
    hashes = {link.hash for link in links.links}
    removed = [link for link in links.gone if link.hash not in _pruned(folder, links)]
    if problem is None and removed:
        problem = f"the manifest of sync {removed[-1].sync_id} ({removed[-1].hash[:12]}) is missing"
    if problem is None and isinstance(head, tuple) and head[0] not in hashes:
        problem = f"HEAD names sync {head[1]} ({head[0][:12]}), whose manifest is missing"
    return last, problem or _damage(folder, last)


def _pruned(folder: Path, links: Links) -> set[str]:
    """The hashes of the manifests the store's prunes removed (their headers list them)."""
    pruned: set[str] = set()
    for link in links.links:
        if link.kind == "prune":
            manifest = read_manifest(sealed_path(folder, link.sync_id), entries=False)
            for item in (manifest.header.get("pruned") or []) if manifest is not None else []:
                if isinstance(item, list) and len(item) >= 2:
                    pruned.add(str(item[1]))
    return pruned


def _damage(folder: Path, last: Link) -> str | None:
    """Why the last sealed manifest cannot be followed (None: it can)."""
    try:
        manifest = load_manifest(sealed_path(folder, last.sync_id))
    except OSError as exc:
        return f"the last sealed manifest (sync {last.sync_id}) is not readable: {exc}"
    if manifest.damaged:
        return f"the last sealed manifest (sync {last.sync_id}): {manifest.damaged}"
    actual = (manifest.seal or {}).get("hash")
    if expected_hash(manifest) != actual or actual != last.hash:
        return f"the manifest of sync {last.sync_id} (the last seal) was edited: it does not hash to its seal"
    return None


# -- sealing ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Sealed:
    """A manifest sealed into the chain: its hash (the new last seal), and the break of
    the chain it found and recorded, if any."""

    hash: str
    sync_id: str
    breaks: str | None = None


def _tidy(folder: Path) -> None:
    """Under the chain's lock: remove what a killed seal left, temporary files (no seal
    is writing now) and the records of manifests sealed since (their twin wins)."""
    found = listing(folder.parent, (folder.name,))
    sealed = {name for name, kind in found if kind == "file" and name.endswith(SEALED_SUFFIX)}
    for name, kind in found:
        if kind == "file" and (name.startswith(".") and name.endswith(".tmp") or f"{name}.gz" in sealed):
            remove_file(folder.parent, (folder.name, name))


def _move_head(folder: Path, link: Link, modes: FileModes) -> None:
    if read_head(folder) != (link.hash, link.sync_id):
        write_file(folder.parent, (folder.name, HEAD), f"{link.hash} {link.sync_id}\n".encode(),
                   mode=modes.file, folder_mode=modes.folder, sync=True)


def seal(path: Path, how: str = "complete", modes: FileModes | None = None,
         lock: ChainLock = folder_lock) -> Sealed:
    """Seal the manifest at `path` (``how``: ``complete``, or ``interrupted`` for one a
    killed sync left) after the chain's last seal (see the module docstring). A manifest
    sealed before (by another process, or a seal killed after its rename) is not sealed
    again: the caches are put right. Its files get `modes` (default: owner-only). `lock`
    is held throughout."""
    modes = modes or FileModes()
    folder = path.parent
    sync_id = check_sync_id(path.name.removesuffix(SUFFIX))
    with lock(path):
        _tidy(folder)
        links = chain_links(folder, save=True, modes=modes)
        twin = next((link for link in links.links if link.sync_id == sync_id), None)
        if twin is not None:
            last, _problem = last_seal(folder, links)
            if last == twin:
                _move_head(folder, twin, modes)
            manifest = read_manifest(sealed_path(folder, sync_id), entries=False)
            return Sealed(twin.hash, sync_id, (manifest.seal or {}).get("break") if manifest else None)
        try:
            manifest = load_manifest(path)
        except OSError as exc:
            raise ValueError(f"{path} is not a readable manifest: {exc}") from None
        last, breaks = last_seal(folder, links)
        previous = last.hash if last is not None else None
        if breaks:
            logger.warning("the evidence chain is broken: %s; sync %s is sealed after it, the break "
                           "recorded (see `diligence verify`)", breaks, sync_id)
        entries = canonical(manifest.entries)
        merkle = merkle_root(leaves(entries))
        outcomes = manifest.outcome_records()
        content = content_digest(manifest.header, outcomes, how, breaks)
        digest = manifest_hash(previous, content, merkle)
        tables = ResponseStore(folder.parent, ENTRIES, modes)
        try:
            table = tables.put(orjson.dumps(
                [[e.method, e.path, e.namespace, e.status, e.sha256, e.size, e.kept_from, e.note] for e in entries]),
                sync=True)
        finally:
            tables.close()
        sealed_at = datetime.now(timezone.utc).isoformat()
        document = {
            "header": manifest.header,
            "outcomes": outcomes,
            "entries": table,
            "fetched_at": [e.fetched_at for e in entries],
            "namespaces": sorted(([ns, n] for ns, n in manifest.namespaces().items()),
                                 key=lambda pair: pair[0] or ""),
            "seal": {"previous": previous, "entries": len(entries), "merkle": merkle, "content": content,
                     "sealed_at": sealed_at, "how": how, "hash": digest, **({"break": breaks} if breaks else {})},
        }
        write_file(folder.parent, (folder.name, f"{sync_id}{SEALED_SUFFIX}"),
                   gzip.compress(orjson.dumps(document), compresslevel=9, mtime=0),
                   mode=modes.file, folder_mode=modes.folder, sync=True)
        link = Link(digest, previous, sync_id, str(manifest.header.get("kind", "sync")), sealed_at)
        _write_chain(folder, [*links.links, link], modes)
        _move_head(folder, link, modes)
        remove_file(folder.parent, (folder.name, path.name))
        return Sealed(digest, sync_id, breaks)
