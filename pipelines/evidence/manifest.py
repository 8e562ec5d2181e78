"""A sync's manifest: one record per response it read, read back as a store holds it.

::

    <store>/syncs/<sync_id>.manifest        while the sync runs: its records, appended
        header   {"manifest": 1, "sync_id", "kind", "started_at", "synced_at",
                  "base_url", "account", "warehouse", "resources", "schema", "version",
                  "pid", "host"}
        entry    ["E", method, path, namespace, status, fetched_at, sha256, size, from, note]
        outcome  ["N", namespace, "committed" | "failed", error, rows?]
    <store>/syncs/<sync_id>.manifest.gz     once sealed (gzip JSON): the header, the
        outcomes, the entries' table (by its hash, in <store>/entries/), each entry's
        fetched_at, the entries per namespace, and the seal {"previous", "entries",
        "merkle", "content", "sealed_at", "how", "hash", "break"?}
    <store>/syncs/HEAD    "<hash of the last sealed manifest> <its sync_id>" (a cache)
    <store>/syncs/CHAIN   one line per sealed manifest: its hash, the previous one's,
                          its sync id, kind and seal time (a cache; see :mod:`.sealing`)

Every request the sync completes adds an entry as its answer arrives: the response's
status, when it came, and the SHA-256 and size of its body, which
:class:`~.store.ResponseStore` keeps (``from`` names the interrupted sync an answer was
kept from; ``note`` is a page's ``Link`` header, or ``file`` for a downloaded document's
file, whose bytes are not kept). After a namespace is committed, an outcome record says
so, with the raw row versions the commit inserted and retired per table (``rows``:
``{table: [inserted, retired]}``), which ``diligence verify`` counts again: a row
deleted from the warehouse is missed there. Sealing (:mod:`.sealing`) covers all of it
with one hash that links to the manifest sealed before.

While it is written, the manifest is the sync's resume journal: a sync killed half-way
leaves an unsealed manifest, whose entries the next sync answers from. Each record is
``<length u32><crc32 u32><payload>`` (payload: JSON); a process killed at any byte leaves
a file whose last record is short or fails its checksum, and reading stops there.

A manifest is read as the outside world wrote it (:mod:`.confined`): never through a
link, bounded in size, its sync id and every hash checked against their grammar; one
that breaks a rule is unreadable (:func:`load_manifest` says why) or damaged.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from .confined import (
    gunzip_file,
    is_sha256,
    is_sync_id,
    listing,
    open_file,
    shown,
)
from .errors import EvidenceFileError
from .store import ENTRIES, MAX_TABLE, ResponseStore, body_sha256

__all__ = [
    "Entry",
    "Manifest",
    "SEALED_SUFFIX",
    "SUFFIX",
    "encode",
    "load_manifest",
    "manifest_paths",
    "manifests",
    "read_appended",
    "read_manifest",
    "sealed_path",
]

MANIFEST_VERSION = 1
SUFFIX = ".manifest"
SEALED_SUFFIX = ".manifest.gz"
HEAD = "HEAD"
CHAIN = "CHAIN"
_RECORD = struct.Struct("<II")
#: the largest record of a manifest being written (a header, an entry, an outcome)
_MAX_RECORD = 1 << 20


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

    def problem(self) -> str | None:
        """Why this entry is not well-formed (its names are used as paths and its size
        as a bound), or None."""
        if not isinstance(self.method, str) or not isinstance(self.path, str) or not isinstance(self.fetched_at, str):
            return "an entry whose method, path or time is not text"
        if self.namespace is not None and not isinstance(self.namespace, str):
            return f"the entry of {shown(self.path)} has a namespace that is not text"
        if not is_sha256(self.sha256):
            return f"the entry of {shown(self.path)} names a response {shown(self.sha256)} that is not a SHA-256"
        if type(self.size) is not int or self.size < 0 or type(self.status) is not int:
            return f"the entry of {shown(self.path)} has a size or status that is not a whole number"
        if self.kept_from is not None and not is_sync_id(self.kept_from):
            return f"the entry of {shown(self.path)} was kept from {shown(self.kept_from)}, not a sync id"
        if self.note is not None and not isinstance(self.note, str):
            return f"the entry of {shown(self.path)} has a note that is not text"
        return None


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


#: namespace -> table -> [row versions inserted, retired] by a committed namespace
RowCounts = dict[str, list[int]]


@dataclass
class Manifest:
    """A manifest as read from disk (its intact part)."""

    path: Path
    header: dict[str, Any]
    entries: list[Entry] = field(default_factory=list)
    #: namespace -> ("committed" | "failed", error)
    outcomes: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    #: namespace -> the raw row versions its commit inserted and retired, per table
    #: (syncs of older releases recorded none)
    rows: dict[str, RowCounts] = field(default_factory=dict)
    seal: dict[str, Any] | None = None
    #: bytes of intact records, and of the file (more: a torn tail); a sealed one's: 0
    intact: int = 0
    size: int = 0
    #: why a sealed manifest's content cannot be read whole (its entries' table is
    #: missing, altered or not well-formed), else None
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

    def outcome_records(self) -> list[list[Any]]:
        """The outcomes as a sealed manifest keeps them (and its hash covers them)."""
        return sorted([ns, status, error, *([self.rows[ns]] if ns in self.rows else [])]
                      for ns, (status, error) in self.outcomes.items())

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


def sealed_path(folder: Path, sync_id: str) -> Path:
    if not is_sync_id(sync_id):
        raise EvidenceFileError(f"sync id {shown(sync_id)} is not a sync id (like 20261126T173518945208Z)")
    return folder / f"{sync_id}{SEALED_SUFFIX}"


def load_manifest(path: Path, *, entries: bool = True) -> Manifest:
    """The manifest at `path`: a sealed one whole (`entries` False: without its entries,
    see :meth:`Manifest.load_entries`), one being written (or left by a killed sync) as
    far as its records are intact. Raises :class:`EvidenceFileError` (or
    FileNotFoundError) saying why it cannot be read."""
    stem = path.name.removesuffix(SEALED_SUFFIX).removesuffix(SUFFIX)
    if not is_sync_id(stem):
        raise EvidenceFileError(f"{path.name} is not the name of a manifest (<sync id>{SEALED_SUFFIX})")
    if path.name.endswith(SEALED_SUFFIX):
        body = gunzip_file(path.parent.parent, (path.parent.name, path.name), MAX_TABLE)
        try:
            return _read_sealed(path, orjson.loads(body), entries)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
            raise EvidenceFileError(f"{path.name} is not a sealed manifest ({type(exc).__name__})") from None
    with open_file(path.parent.parent, (path.parent.name, path.name)) as file:
        size = os.fstat(file.fileno()).st_size
        if size > MAX_TABLE:
            raise EvidenceFileError(f"{path.name} holds more than {MAX_TABLE:,} bytes: not read")
        manifest = _read_records(path, file, size)
    if manifest is None:
        raise EvidenceFileError(f"{path.name}: its header is not readable")
    return manifest


def read_manifest(path: Path, *, entries: bool = True) -> Manifest | None:
    """:func:`load_manifest`, or None when the manifest cannot be read."""
    try:
        return load_manifest(path, entries=entries)
    except OSError:
        return None


def read_appended(path: Path, offset: int) -> tuple[list[Entry], int] | None:
    """What a manifest being written appended from byte `offset` (where its intact
    records ended when it was last read: :attr:`Manifest.intact`): the entries of the
    intact records after it, and where they end; None when it cannot be read. Reads
    only those bytes, where :func:`read_manifest` reads the whole file again."""
    appended = Manifest(path, {}, intact=offset)
    try:
        with open_file(path.parent.parent, (path.parent.name, path.name)) as file:
            file.seek(offset)
            _read_body(appended, _records(file), offset)
    except OSError:
        return None
    return appended.entries, appended.intact


def _header_problem(path: Path, header: Any) -> str | None:
    if not isinstance(header, dict) or header.get("manifest") != MANIFEST_VERSION:
        return "its header is not a manifest's"
    stem = path.name.removesuffix(SEALED_SUFFIX).removesuffix(SUFFIX)
    if header.get("sync_id") != stem:
        return f"its header names sync {shown(header.get('sync_id'))}, not {stem}"
    return None


def _read_records(path: Path, file: BinaryIO, size: int) -> Manifest | None:
    records = _records(file)
    first = next(records, None)
    if first is None:
        return None
    try:
        header = orjson.loads(first[2])
    except orjson.JSONDecodeError:
        return None
    if _header_problem(path, header) is not None:
        return None
    manifest = Manifest(path, header, intact=first[1], size=size)
    _read_body(manifest, records, 0)
    return manifest


def _rows_of(value: Any) -> RowCounts | None:
    """A committed namespace's row counts, if well-formed."""
    if not isinstance(value, dict):
        return None
    counts: RowCounts = {}
    for table, pair in value.items():
        if not (isinstance(table, str) and isinstance(pair, list) and len(pair) == 2
                and all(type(n) is int and n >= 0 for n in pair)):
            return None
        counts[table] = list(pair)
    return counts


def _outcome(manifest: Manifest, record: list[Any]) -> bool:
    """Add the outcome `record` (``[ns, status, error, rows?]``) to `manifest`; False
    when it is not well-formed."""
    if len(record) not in (3, 4) or not isinstance(record[0], str) or record[1] not in ("committed", "failed"):
        return False
    if record[2] is not None and not isinstance(record[2], str):
        return False
    rows = _rows_of(record[3]) if len(record) == 4 else None
    if len(record) == 4 and rows is None:
        return False
    manifest.outcomes[record[0]] = (record[1], record[2])
    if rows is not None:
        manifest.rows[record[0]] = rows
    return True


def _read_body(manifest: Manifest, records: Iterator[tuple[int, int, bytes]], start: int) -> None:
    """Add the entries and outcomes of `records` (read from byte `start` of the file) to
    `manifest` up to the first record that is neither (or not well-formed); its `intact`
    becomes their end."""
    for _offset, end, payload in records:
        try:
            record = orjson.loads(payload)
        except orjson.JSONDecodeError:
            break
        if isinstance(record, list) and record and record[0] == "E" and len(record) == 10:
            entry = Entry.of(record)
            if entry.problem() is not None:
                break
            manifest.entries.append(entry)
        elif not (isinstance(record, list) and record and record[0] == "N" and _outcome(manifest, record[1:])):
            break
        manifest.intact = start + end


def _read_sealed(path: Path, document: dict[str, Any], entries: bool = True) -> Manifest:
    header = document["header"]
    problem = _header_problem(path, header)
    if problem is not None:
        raise EvidenceFileError(f"{path.name}: {problem}")
    seal = document["seal"]
    if not (isinstance(seal, dict) and is_sha256(seal.get("hash"))
            and (seal.get("previous") is None or is_sha256(seal.get("previous")))):
        raise EvidenceFileError(f"{path.name}: its seal is not well-formed")
    if not is_sha256(document["entries"]) or not isinstance(document["fetched_at"], list):
        raise EvidenceFileError(f"{path.name}: its table of entries is not named by a SHA-256")
    manifest = Manifest(path, header, seal=seal)
    for record in document["outcomes"]:
        if not (isinstance(record, list) and _outcome(manifest, record)):
            raise EvidenceFileError(f"{path.name}: an outcome is not well-formed")
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
        body = store.get(table, MAX_TABLE)
    except FileNotFoundError:
        manifest.damaged = f"its table of entries {table} is missing"
        return
    except OSError as exc:
        manifest.damaged = f"its table of entries {table} cannot be read: {exc}"
        return
    if body_sha256(body) != table:
        manifest.damaged = f"its table of entries {table} was altered"
        return
    try:
        rows = orjson.loads(body)
        found = [Entry(row[0], row[1], row[2], row[3], at, row[4], row[5], row[6], row[7])
                 for row, at in zip(rows, times, strict=True)]
    except (orjson.JSONDecodeError, TypeError, ValueError, IndexError, KeyError):
        manifest.damaged = "its entries and their times do not match"
        return
    problem = next((p for e in found if (p := e.problem()) is not None), None)
    if problem is not None:
        manifest.damaged = f"its table of entries holds {problem}"
        return
    manifest.entries = found
    manifest.counts = None


def manifest_paths(folder: Path) -> list[Path]:
    """Every manifest file of the store's `folder` (``syncs``), in sync id order: the
    sealed ones, and those being written (or left by a killed sync) that were not sealed
    since (a seal killed after its rename leaves both; the sealed one is the manifest).
    Only regular files with a manifest's name; :class:`EvidenceFileError` when the
    folder is a link."""
    found = listing(folder.parent, (folder.name,))
    sealed = {name for name, kind in found if kind == "file" and name.endswith(SEALED_SUFFIX)}
    paths = [folder / name for name, kind in found if kind == "file" and (
        name in sealed or (name.endswith(SUFFIX) and f"{name}.gz" not in sealed))
        and is_sync_id(name.removesuffix(SEALED_SUFFIX).removesuffix(SUFFIX))]
    return sorted(paths, key=lambda p: p.name.split(".")[0])


def manifests(folder: Path, *, entries: bool = True) -> list[Manifest]:
    """Every readable manifest of the store's `folder`, in name (sync id) order
    (`entries` False: the sealed ones without their entries)."""
    found = []
    with contextlib.suppress(EvidenceFileError):
        for path in manifest_paths(folder):
            manifest = read_manifest(path, entries=entries)
            if manifest is not None:
                found.append(manifest)
    return found
