"""A sync's manifest: one record per response it read, sealed into a hash chain.

::

    <store>/syncs/<sync_id>.manifest        while the sync runs: its records, appended
        header   {"manifest": 1, "sync_id", "kind", "started_at", "synced_at",
                  "base_url", "account", "warehouse", "resources", "schema", "version",
                  "pid", "host"}
        entry    ["E", method, path, namespace, status, fetched_at, sha256, size, from, note]
        outcome  ["N", namespace, "committed" | "failed", error]
    <store>/syncs/<sync_id>.manifest.gz     once sealed (gzip JSON): the header, the
        outcomes, the entries' table (by its hash, in <store>/entries/), each entry's
        fetched_at, the entries per namespace, and the seal {"previous", "entries",
        "merkle", "content", "sealed_at", "how", "hash", "break"?}
    <store>/syncs/HEAD    "<hash of the last sealed manifest> <its sync_id>"

Every request the sync completes adds an entry as its answer arrives: the response's
status, when it came, and the SHA-256 and size of its body, which
:class:`~.store.ResponseStore` keeps (``from`` names the interrupted sync an answer was
kept from; ``note`` is a page's ``Link`` header, or ``file`` for a downloaded document's
file, whose bytes are not kept). After a namespace is committed, an outcome
record says so. At the end the manifest is sealed: its hash covers its header and
outcomes, the Merkle root of its entries (in canonical order: namespace, path,
method) and the previous sealed manifest's hash, so the manifests form a chain whose
head is in ``HEAD``; sealing is serialised by a lock (``flock``) on the store's ``syncs``
folder itself.
The hash is of the content, not of the file: a sealed manifest keeps its entries'
table (method, path, namespace, status, sha256, size, ...) content-addressed in
``<store>/entries/``, so syncs that read the same answers share it, and only their
times are stored again.

While it is written, the manifest is the sync's resume journal: a sync killed half-way
leaves an unsealed manifest, whose entries the next sync answers from (see
:mod:`.kept`); that next sync seals it first, as ``interrupted``. Each record is
``<length u32><crc32 u32><payload>`` (payload: JSON); a process killed at any byte leaves
a file whose last record is short or fails its checksum, and reading stops there.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import hashlib
import logging
import os
import socket
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from .store import ENTRIES, FileModes, ResponseStore, body_sha256, make_folder, new_file

__all__ = [
    "ChainLock",
    "Entry",
    "Manifest",
    "ManifestWriter",
    "Sealed",
    "canonical",
    "chain_head",
    "content_digest",
    "expected_hash",
    "folder_lock",
    "head_problem",
    "leaf_hash",
    "leaves",
    "manifest_hash",
    "manifest_paths",
    "manifests",
    "merkle_proof",
    "merkle_root",
    "read_manifest",
    "root_of_proof",
    "seal",
    "sealed_path",
]

logger = logging.getLogger("diligence.evidence")

MANIFEST_VERSION = 1
SUFFIX = ".manifest"
SEALED_SUFFIX = ".manifest.gz"
HEAD = "HEAD"
_RECORD = struct.Struct("<II")
_MAX_RECORD = 1 << 31


@dataclass(frozen=True)
class Entry:
    """One response a sync read (or kept from an interrupted sync: `kept_from`)."""

    method: str
    path: str
    namespace: str | None
    status: int
    fetched_at: str
    sha256: str
    size: int
    kept_from: str | None = None
    #: the response's ``Link`` header (a page's next link), or "file" for a document's file
    note: str | None = None

    def record(self) -> list[Any]:
        return ["E", self.method, self.path, self.namespace, self.status, self.fetched_at,
                self.sha256, self.size, self.kept_from, self.note]

    @classmethod
    def of(cls, record: list[Any]) -> Entry:
        return cls(*record[1:10])

    @property
    def key(self) -> tuple[str, str, str | None]:
        return (self.method, self.path, self.namespace)


# -- the file --------------------------------------------------------------------------
def encode(payload: Any) -> bytes:
    data = orjson.dumps(payload)
    return _RECORD.pack(len(data), zlib.crc32(data)) + data


def _records(file: BinaryIO) -> Iterator[tuple[int, int, bytes]]:
    """(offset, end, payload) of every intact record of `file`; stops at a torn one."""
    offset = 0
    while True:
        head = file.read(_RECORD.size)
        if len(head) < _RECORD.size:
            return
        length, crc = _RECORD.unpack(head)
        if length > _MAX_RECORD:
            return
        payload = file.read(length)
        if len(payload) < length or zlib.crc32(payload) != crc:
            return
        end = offset + _RECORD.size + length
        yield offset, end, payload
        offset = end


@dataclass
class Manifest:
    """A manifest as read from disk (its intact part)."""

    path: Path
    header: dict[str, Any]
    entries: list[Entry] = field(default_factory=list)
    #: namespace -> ("committed" | "failed", error)
    outcomes: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    seal: dict[str, Any] | None = None
    #: bytes of intact records, and of the file (more: a torn tail); a sealed one's: 0
    intact: int = 0
    size: int = 0
    #: why a sealed manifest's content cannot be read whole (its entries' table is
    #: missing or altered), else None
    damaged: str | None = None
    #: a sealed manifest's table of entries (its hash, in the store's ``entries``)
    table: str | None = None
    #: a sealed manifest read without its entries: entries per namespace, and its
    #: entries' times (the table is read by :meth:`load_entries`)
    counts: dict[str | None, int] | None = None
    times: list[str] | None = None

    def namespaces(self) -> dict[str | None, int]:
        """Entries per namespace (None: user-info)."""
        if self.counts is not None and not self.entries:
            return dict(self.counts)
        found: dict[str | None, int] = {}
        for entry in self.entries:
            found[entry.namespace] = found.get(entry.namespace, 0) + 1
        return found

    def load_entries(self) -> Manifest:
        """Read a sealed manifest's entries if it was read without them; returns itself."""
        if self.seal is not None and self.counts is not None and not self.entries and self.damaged is None:
            _read_table(self, self.times or [])
        return self

    @property
    def sync_id(self) -> str:
        return str(self.header.get("sync_id"))

    @property
    def sealed(self) -> bool:
        return self.seal is not None

    def started_at(self) -> datetime | None:
        try:
            started = datetime.fromisoformat(str(self.header.get("started_at")))
        except ValueError:
            return None
        return started if started.tzinfo else started.replace(tzinfo=timezone.utc)


def read_manifest(path: Path, *, entries: bool = True) -> Manifest | None:
    """A manifest: a sealed one whole (`entries` False: without its entries, see
    :meth:`Manifest.load_entries`), one being written (or left by a killed sync) as far
    as its records are intact; None when not even its header is readable."""
    file = _open(path)
    if file is None:
        return None
    with file:
        try:
            if path.name.endswith(SEALED_SUFFIX):
                return _read_sealed(path, orjson.loads(gzip.decompress(file.read())), entries)
            return _read_records(path, file, os.fstat(file.fileno()).st_size)
        except (OSError, EOFError, zlib.error, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            return None


def read_appended(path: Path, offset: int) -> tuple[list[Entry], int] | None:
    """What a manifest being written appended from byte `offset` (where its intact
    records ended when it was last read: :attr:`Manifest.intact`): the entries of the
    intact records after it, and where they end; None when it cannot be read. Reads
    only those bytes, where :func:`read_manifest` reads the whole file again."""
    file = _open(path)
    if file is None:
        return None
    appended = Manifest(path, {}, intact=offset)
    with file:
        try:
            file.seek(offset)
            _read_body(appended, _records(file), offset)
        except OSError:
            return None
    return appended.entries, appended.intact


def _open(path: Path) -> BinaryIO | None:
    """`path` opened for reading, not through a symbolic link; None when it cannot be."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    return os.fdopen(fd, "rb", buffering=1 << 20)


def _read_records(path: Path, file: BinaryIO, size: int) -> Manifest | None:
    records = _records(file)
    first = next(records, None)
    if first is None:
        return None
    try:
        header = orjson.loads(first[2])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(header, dict) or header.get("manifest") != MANIFEST_VERSION:
        return None
    manifest = Manifest(path, header, intact=first[1], size=size)
    _read_body(manifest, records, 0)
    return manifest


def _read_body(manifest: Manifest, records: Iterator[tuple[int, int, bytes]], start: int) -> None:
    """Add the entries and outcomes of `records` (read from byte `start` of the file) to
    `manifest` up to the first record that is neither; its `intact` becomes their end."""
    for _offset, end, payload in records:
        try:
            record = orjson.loads(payload)
        except orjson.JSONDecodeError:
            break
        if isinstance(record, list) and record and record[0] == "E" and len(record) == 10:
            manifest.entries.append(Entry.of(record))
        elif isinstance(record, list) and record and record[0] == "N" and len(record) == 4:
            manifest.outcomes[str(record[1])] = (str(record[2]), record[3])
        else:
            break
        manifest.intact = start + end


def _read_sealed(path: Path, document: dict[str, Any], entries: bool = True) -> Manifest | None:
    header = document["header"]
    if header.get("manifest") != MANIFEST_VERSION:
        return None
    manifest = Manifest(path, header, seal=document["seal"],
                        outcomes={str(ns): (str(status), error) for ns, status, error in document["outcomes"]})
    manifest.table = document["entries"]
    if not entries and "namespaces" in document:
        manifest.counts = {ns: int(n) for ns, n in document["namespaces"]}
        manifest.times = document["fetched_at"]
        return manifest
    _read_table(manifest, document["fetched_at"])
    return manifest


def _read_table(manifest: Manifest, times: list[str]) -> None:
    """Read a sealed manifest's entries from its table (or say why it is damaged)."""
    table = str(manifest.table)
    store = ResponseStore(manifest.path.parent.parent, ENTRIES)
    try:
        body = store.get(table)
    except (OSError, EOFError, zlib.error):
        manifest.damaged = f"its table of entries {table} is missing"
        return
    if body_sha256(body) != table:
        manifest.damaged = f"its table of entries {table} was altered"
        return
    rows = orjson.loads(body)
    if len(rows) != len(times):
        manifest.damaged = "its entries and their times do not match"
        return
    manifest.entries = [Entry(row[0], row[1], row[2], row[3], at, row[4], row[5], row[6], row[7])
                        for row, at in zip(rows, times, strict=True)]
    manifest.counts = None


# -- hashes ----------------------------------------------------------------------------
def merkle_root(leaves: list[str]) -> str:
    """The Merkle root of hex leaf hashes (an odd one is carried up; no leaf: the hash of
    nothing)."""
    if not leaves:
        return hashlib.sha256(b"").hexdigest()
    level = [bytes.fromhex(leaf) for leaf in leaves]
    while len(level) > 1:
        paired = [hashlib.sha256(level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0].hex()


def canonical(entries: list[Entry]) -> list[Entry]:
    """Entries in the order a manifest's hash takes them: by namespace, path, method (a
    sync completes its requests in no fixed order)."""
    return sorted(entries, key=lambda e: (e.namespace or "", e.path, e.method, e.fetched_at))


def leaves(entries: list[Entry]) -> list[str]:
    """The Merkle leaves of entries in canonical order: the hash of each one's record."""
    return [leaf_hash(e) for e in canonical(entries)]


def content_digest(header: dict[str, Any], outcomes: dict[str, tuple[str, str | None]],
                   how: str = "complete", breaks: str | None = None) -> str:
    """The digest of a manifest's header, outcomes, how it was sealed and the chain break
    it recorded (if any)."""
    document = {"header": header, "outcomes": sorted([ns, *value] for ns, value in outcomes.items()),
                "how": how, "break": breaks}
    return hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()


def merkle_proof(leaves: list[str], index: int) -> list[list[str]]:
    """The path from leaf `index` to the root of :func:`merkle_root`: per level, the
    sibling's side (``L`` or ``R``) and hash; a level where the node is carried up adds
    nothing."""
    proof: list[list[str]] = []
    level = [bytes.fromhex(leaf) for leaf in leaves]
    while len(level) > 1:
        sibling = index ^ 1
        if sibling < len(level):
            proof.append(["L" if sibling < index else "R", level[sibling].hex()])
        paired = [hashlib.sha256(level[i] + level[i + 1]).digest() for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level, index = paired, index // 2
    return proof


def root_of_proof(leaf: str, proof: list[list[str]]) -> str:
    """The root that `leaf` and its :func:`merkle_proof` lead to."""
    node = bytes.fromhex(leaf)
    for side, sibling in proof:
        pair = bytes.fromhex(sibling) + node if side == "L" else node + bytes.fromhex(sibling)
        node = hashlib.sha256(pair).digest()
    return node.hex()


def leaf_hash(entry: Entry) -> str:
    """The Merkle leaf of one entry: the hash of its record."""
    return hashlib.sha256(orjson.dumps(entry.record())).hexdigest()


def manifest_hash(previous: str | None, content: str, merkle: str) -> str:
    """A sealed manifest's hash: its header and outcomes, its entries' Merkle root, and
    the previous sealed manifest's hash (None: the first of the chain)."""
    return hashlib.sha256(f"diligence-manifest:{previous or ''}:{content}:{merkle}".encode()).hexdigest()


def expected_hash(manifest: Manifest) -> str:
    """What a sealed manifest's hash must be, recomputed from its content."""
    assert manifest.seal is not None
    seal = manifest.seal
    content = content_digest(manifest.header, manifest.outcomes, str(seal.get("how")), seal.get("break"))
    return manifest_hash(seal.get("previous"), content, merkle_root(leaves(manifest.entries)))


# -- writing ---------------------------------------------------------------------------
class ManifestWriter:
    """The manifest a sync writes (append-only, thread-safe), sealed at its end."""

    def __init__(self, folder: Path, header: dict[str, Any], modes: FileModes | None = None,
                 chain_lock: ChainLock | None = None) -> None:
        self.modes = modes or FileModes()
        #: held while a manifest of this store is sealed (see :func:`seal`)
        self.chain_lock = chain_lock or folder_lock
        make_folder(folder, self.modes)
        self.folder = folder
        self.sync_id = str(header["sync_id"])
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

    def outcome(self, namespace: str, status: str, error: str | None = None) -> None:
        """Record that `namespace` was committed, or failed (its previous data kept)."""
        self._append(["N", namespace, status, error])

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(self._fd)
                self._fd = -1

    def seal(self, how: str = "complete") -> Sealed:
        """Seal this manifest into the chain (the new head)."""
        self.close()
        return seal(self.path, how, self.modes, lock=self.chain_lock)


#: What :func:`seal` holds while it reads the chain's head and writes the new one: given
#: the manifest sealed, a context manager (default :func:`folder_lock`; a store kept in
#: a bucket also takes the bucket's lock, see :mod:`diligence.evidence.bucket`).
ChainLock = Callable[[Path], AbstractContextManager[None]]


@contextlib.contextmanager
def folder_lock(manifest: Path) -> Iterator[None]:
    """Held while a manifest is sealed: an exclusive ``flock`` on its folder itself (no
    lock file is left behind)."""
    fd = os.open(manifest.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def chain_head(folder: Path) -> tuple[str, str] | None:
    """(hash, sync_id) of the last sealed manifest of the store's `folder`, or None."""
    try:
        words = (folder / HEAD).read_text().split()
    except OSError:
        return None
    return (words[0], words[1]) if len(words) == 2 else None


def sealed_path(folder: Path, sync_id: str) -> Path:
    return folder / f"{sync_id}{SEALED_SUFFIX}"


def head_problem(folder: Path) -> str | None:
    """Why the chain's head in the store's `folder` cannot be followed (None: it can):
    ``HEAD`` is missing while sealed manifests exist, or names a manifest that is
    missing, damaged, or does not hash to it. Cheap: only the head is read (``diligence
    verify`` checks the whole chain)."""
    head = chain_head(folder)
    if head is None:
        if (folder / HEAD).exists():
            return f"{folder / HEAD} is not readable"
        sealed = list(folder.glob(f"*{SEALED_SUFFIX}")) if folder.is_dir() else []
        return f"{folder / HEAD} is missing while {len(sealed)} sealed manifests are there" if sealed else None
    digest, sync_id = head
    manifest = read_manifest(sealed_path(folder, sync_id))
    if manifest is None or not manifest.sealed:
        return f"the head's manifest (sync {sync_id}) is missing or not readable"
    if manifest.damaged:
        return f"the head's manifest (sync {sync_id}): {manifest.damaged}"
    if manifest.seal.get("hash") != digest:  # type: ignore[union-attr]
        return f"HEAD ({digest[:12]}) is not the hash of the manifest of sync {sync_id}"
    if expected_hash(manifest) != digest:
        return f"the manifest of sync {sync_id} (the head) was edited: it does not hash to its seal"
    return None


def _last_sealed(folder: Path) -> str | None:
    """The hash the newest readable sealed manifest carries (when HEAD is lost)."""
    for path in reversed(manifest_paths(folder)):
        manifest = read_manifest(path) if path.name.endswith(SEALED_SUFFIX) else None
        if manifest is not None and manifest.seal is not None:
            return str(manifest.seal.get("hash"))
    return None


@dataclass(frozen=True)
class Sealed:
    """A manifest sealed into the chain: its hash (the new head), and the break of the
    chain it found and recorded, if any."""

    hash: str
    sync_id: str
    breaks: str | None = None


def seal(path: Path, how: str = "complete", modes: FileModes | None = None,
         lock: ChainLock = folder_lock) -> Sealed:
    """Seal the manifest at `path` (``how``: ``complete``, or ``interrupted`` for one a
    killed sync left) after the chain's head: its entries' table goes to the store's
    ``entries``, and ``<sync_id>.manifest.gz`` replaces the records (a torn tail is
    dropped). A head that cannot be followed (:func:`head_problem`) is not repaired:
    the manifest records the break (its hash covers it) and links to the head as found,
    and the break is logged. Its files get `modes` (default: owner-only). A manifest
    another process sealed meanwhile is not sealed again. `lock` is held throughout."""
    modes = modes or FileModes()
    folder = path.parent
    with lock(path):
        manifest = read_manifest(path)
        if manifest is None and not path.exists():
            manifest = read_manifest(sealed_path(folder, path.name.removesuffix(SUFFIX)))
        if manifest is None:
            raise ValueError(f"{path} is not a readable manifest")
        if manifest.seal is not None:
            return Sealed(str(manifest.seal["hash"]), manifest.sync_id, manifest.seal.get("break"))
        breaks = head_problem(folder)
        head = chain_head(folder)
        previous = head[0] if head else _last_sealed(folder)
        if breaks:
            logger.warning("the evidence chain is broken: %s; sync %s is sealed after it, the break "
                           "recorded (see `diligence verify`)", breaks, manifest.sync_id)
        entries = canonical(manifest.entries)
        merkle = merkle_root(leaves(entries))
        content = content_digest(manifest.header, manifest.outcomes, how, breaks)
        digest = manifest_hash(previous, content, merkle)
        table = ResponseStore(folder.parent, ENTRIES, modes).put(orjson.dumps(
            [[e.method, e.path, e.namespace, e.status, e.sha256, e.size, e.kept_from, e.note] for e in entries]))
        document = {
            "header": manifest.header,
            "outcomes": sorted([ns, *value] for ns, value in manifest.outcomes.items()),
            "entries": table,
            "fetched_at": [e.fetched_at for e in entries],
            "namespaces": sorted(([ns, n] for ns, n in manifest.namespaces().items()),
                                 key=lambda pair: pair[0] or ""),
            "seal": {"previous": previous, "entries": len(entries), "merkle": merkle, "content": content,
                     "sealed_at": datetime.now(timezone.utc).isoformat(), "how": how, "hash": digest,
                     **({"break": breaks} if breaks else {})},
        }
        _write_atomically(sealed_path(folder, manifest.sync_id),
                          gzip.compress(orjson.dumps(document), compresslevel=9, mtime=0), modes)
        path.unlink()
        _write_atomically(folder / HEAD, f"{digest} {manifest.sync_id}\n".encode(), modes)
        return Sealed(digest, manifest.sync_id, breaks)


def _write_atomically(path: Path, data: bytes, modes: FileModes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)  # left by a process of the same pid, killed
    fd = new_file(temporary, modes)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def manifest_paths(folder: Path) -> list[Path]:
    """Every manifest file of the store's `folder` (sealed or not), in sync id order."""
    if not folder.is_dir():
        return []
    return sorted([*folder.glob(f"*{SUFFIX}"), *folder.glob(f"*{SEALED_SUFFIX}")],
                  key=lambda p: p.name.split(".")[0])


def manifests(folder: Path, *, entries: bool = True) -> list[Manifest]:
    """Every readable manifest of the store's `folder`, in name (sync id) order
    (`entries` False: the sealed ones without their entries)."""
    found = []
    for path in manifest_paths(folder):
        manifest = read_manifest(path, entries=entries)
        if manifest is not None:
            found.append(manifest)
    return found
