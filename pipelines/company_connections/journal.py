"""The request journal: what a namespace's interrupted read had fetched, kept on disk.

Every sync is a full read (the service has no change feed), so a sync interrupted at
minute 30 would cost 30 minutes again. Instead, each namespace being read appends the
outcome of every request that completed (its answer, or the 403/404 that stands for
"absent") to a journal file of its own; the next read of that namespace, by the same
account and base URL, with the same resource selection, within ``resume_within``,
answers those requests from the journal and asks the service only for the rest, into
the same warehouse::

    <journal dir>/<namespace folder>.journal
        header   {"version", "schema", "base_url", "account", "warehouse", "namespace",
                  "resources", "sync_id", "started_at"}
        entry    [endpoint, company_id, company_type_id, status, message, body]
        resumed  {"sync_id": ...}        (one per sync that continued it)
        ...

Each record is ``<length u32><crc32 u32><payload>`` (payload: JSON). A process killed
at any byte leaves a file whose last record is short or fails its checksum: reading
stops there and the tail is dropped (cut off before appending). Records are written
with one ``write`` each as the requests complete; the rows are staged again from them
on resume, so they carry the ``synced_at`` of the sync that finally commits them.

What is never journaled: user-info and the connection list (endpoint 5) are always
asked again, so a connection removed since the interruption is not loaded and one
added is read. A journal whose header names another account, base URL, warehouse,
resource selection or schema is ignored with a line, never trusted; one older than
``resume_within`` is ignored too, and one whose header cannot be read is named in a
line and read afresh. The caller deletes a namespace's journal once the
namespace is committed (:meth:`RequestJournal.discard`).

Files are owner-only (0600 in a 0700 folder); they hold what the warehouse holds, and
never a password or token (the account is kept as a digest).
"""

from __future__ import annotations

import hashlib
import logging
import os
import struct
import zlib
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from .models import Company, ConnectionDetail, Document, Questionnaire, adapter
from .schema import TABLE_COLUMNS
from .staging import namespace_folder

__all__ = [
    "JOURNALED_ENDPOINTS",
    "JournalBook",
    "JournalIdentity",
    "JournalSummary",
    "RequestJournal",
    "journal_summaries",
]

logger = logging.getLogger("diligence.journal")

#: Format of the file; a journal of another version is ignored.
JOURNAL_VERSION = 1
SUFFIX = ".journal"
_RECORD = struct.Struct("<II")
#: A record longer than this is taken for a torn or foreign file.
_MAX_RECORD = 1 << 31

#: A digest of the raw tables' columns: a journal written for other tables is ignored.
SCHEMA_DIGEST = hashlib.sha256(orjson.dumps(TABLE_COLUMNS, option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()[:16]


def _documents(body: Any) -> list[Document]:
    return adapter(list[Document]).validate_python(body)


def _documents_json(documents: list[Document]) -> orjson.Fragment:
    return orjson.Fragment(b"[" + b",".join(d.raw_json for d in documents) + b"]")


def _forms(forms: Any) -> Questionnaire:
    return Questionnaire.from_body({"forms": forms})


#: endpoint name (as in ``sync_issues.endpoint``) -> (answer to JSON, JSON to answer).
#: The JSON is what the service sent, so the answer is rebuilt exactly as parsed first;
#: forms and documents reuse the JSON their staged rows are made of (``raw_json``).
CODECS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    "company": (lambda c: orjson.Fragment(c.model_dump_json(by_alias=True)), Company.model_validate),
    "connection": (lambda c: orjson.Fragment(c.model_dump_json(by_alias=True)), ConnectionDetail.model_validate),
    "questionnaire": (lambda q: orjson.Fragment(q.raw_json), _forms),
    "template": (lambda q: orjson.Fragment(q.raw_json), _forms),
    "documents": (_documents_json, _documents),
}
#: The endpoints whose outcomes are journaled (never user-info or the connection list).
JOURNALED_ENDPOINTS = frozenset(CODECS)

Key = tuple[str, str, str]


def _key(endpoint: str, company_id: str | None, company_type_id: str | None) -> Key:
    return (endpoint, company_id or "", company_type_id or "")


def account_digest(base_url: str, account: str | None) -> str:
    """Who a journal belongs to, without keeping the account's name in the file."""
    return hashlib.sha256(f"{base_url}\x00{(account or '').lower()}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class JournalIdentity:
    """What must match for a journal to be reused: base URL, account, the warehouse it is
    loaded into, selection, schema."""

    base_url: str
    #: :func:`account_digest` of the base URL and the login (email; empty in token-only mode)
    account: str
    #: the data resources a sync loads (None: all)
    resources: tuple[str, ...] | None = None
    #: the warehouse the journal's rows are for (its file's absolute path, or a lake's
    #: URI without password): a journal copied to another warehouse's folder is not used
    warehouse: str = ""

    @classmethod
    def of(cls, base_url: str, email: str | None, resources: Collection[str] | None = None,
           warehouse: str = "") -> JournalIdentity:
        url = base_url.rstrip("/")
        return cls(url, account_digest(url, email),
                   tuple(sorted(resources)) if resources is not None else None, warehouse)

    def header(self, namespace: str, sync_id: str, started_at: datetime) -> dict[str, Any]:
        return {
            "version": JOURNAL_VERSION,
            "schema": SCHEMA_DIGEST,
            "base_url": self.base_url,
            "account": self.account,
            "warehouse": self.warehouse,
            "namespace": namespace,
            "resources": list(self.resources) if self.resources is not None else None,
            "sync_id": sync_id,
            "started_at": started_at.isoformat(),
        }

    def mismatch(self, header: dict[str, Any]) -> str | None:
        """Why a journal with `header` must not be reused by this identity (None: it may)."""
        if header.get("version") != JOURNAL_VERSION or header.get("schema") != SCHEMA_DIGEST:
            return "it was written by another version of the schema"
        if header.get("base_url") != self.base_url:
            return "it was written for another base URL"
        if header.get("account") != self.account:
            return "it was written for another account"
        if header.get("warehouse", "") != self.warehouse:
            return f"it was written for another warehouse ({header.get('warehouse') or 'unknown'})"
        resources = header.get("resources")
        if (tuple(resources) if resources is not None else None) != self.resources:
            return "it was written for another --select"
        return None


# -- the file ----------------------------------------------------------------------------------
def _encode(payload: Any) -> bytes:
    data = orjson.dumps(payload)
    return _RECORD.pack(len(data), zlib.crc32(data)) + data


def _records(file: BinaryIO) -> Iterator[tuple[int, int, bytes]]:
    """(offset, end, payload) of every intact record of `file`, read one at a time (so
    memory holds one record, however long the journal); stops at a torn or corrupt one."""
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
class _Contents:
    header: dict[str, Any]
    #: key -> (offset, length) of its record's payload
    index: dict[Key, tuple[int, int]] = field(default_factory=dict)
    sync_ids: list[str] = field(default_factory=list)
    #: bytes of intact records (anything after is a torn tail)
    intact: int = 0
    size: int = 0


def _read(path: Path) -> _Contents | None:
    """The intact part of a journal file (None when not even its header is intact)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb", buffering=1 << 20) as file:
        try:
            return _read_records(file, os.fstat(fd).st_size)
        except OSError:
            return None


def _read_records(file: BinaryIO, size: int) -> _Contents | None:
    contents: _Contents | None = None
    for offset, end, payload in _records(file):
        try:
            record = orjson.loads(payload)
        except orjson.JSONDecodeError:
            break
        if contents is None:
            if not isinstance(record, dict) or "namespace" not in record:
                return None
            contents = _Contents(header=record, sync_ids=[str(record.get("sync_id"))])
        elif isinstance(record, list) and len(record) == 6:
            contents.index[(record[0], record[1], record[2])] = (offset + _RECORD.size, end - offset - _RECORD.size)
        elif isinstance(record, dict) and "sync_id" in record:
            contents.sync_ids.append(str(record["sync_id"]))
        else:
            break
        contents.intact = end
    if contents is not None:
        contents.size = size
    return contents


def _started(header: dict[str, Any]) -> datetime | None:
    try:
        started = datetime.fromisoformat(str(header.get("started_at")))
    except ValueError:
        return None
    return started if started.tzinfo else started.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Replayed:
    """A journaled outcome: the answer (status 200) or a 403/404 with its message."""

    status: int
    message: str | None
    answer: Any


class RequestJournal:
    """One namespace's journal, open for appending; answers the requests it holds."""

    def __init__(self, path: Path, *, kept: dict[Key, tuple[int, int]] | None = None,
                 since: datetime | None = None) -> None:
        self.path = path
        self._index = kept or {}
        #: requests answered by an earlier, interrupted read of the namespace
        self.kept = len(self._index)
        #: when that read began (None for a new journal)
        self.since = since
        #: requests answered from the journal by this read so far
        self.replayed = 0
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        self._reader = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)) if self._index else None

    def _append(self, payload: Any) -> None:
        try:
            os.write(self._fd, _encode(payload))
        except OSError as exc:  # e.g. a full disk: say which file
            raise OSError(exc.errno, exc.strerror, str(self.path)) from None

    def lookup(self, endpoint: str, company_id: str | None, company_type_id: str | None) -> Replayed | None:
        """The journaled outcome of a request, or None when it must be asked."""
        where = self._index.get(_key(endpoint, company_id, company_type_id))
        if where is None or self._reader is None:
            return None
        offset, length = where
        record = orjson.loads(os.pread(self._reader, length, offset))
        status, message, body = record[3], record[4], record[5]
        self.replayed += 1
        return Replayed(status, message, CODECS[endpoint][1](body) if status == 200 else None)

    def record(self, endpoint: str, company_id: str | None, company_type_id: str | None,
               answer: Any = None, *, status: int = 200, message: str | None = None) -> None:
        """Append a completed request's outcome: its answer, or a 403/404 (`status`)."""
        body = CODECS[endpoint][0](answer) if status == 200 else None
        self._append([endpoint, company_id or "", company_type_id or "", status, message, body])

    def close(self) -> None:
        for fd in (self._fd, self._reader):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._fd, self._reader = -1, None

    def discard(self) -> None:
        """Close and delete the journal (the namespace is committed, or starts afresh)."""
        self.close()
        self.path.unlink(missing_ok=True)


@dataclass(frozen=True)
class JournalSummary:
    """A journal on disk, as ``diligence status`` shows it."""

    namespace: str
    path: Path
    kept: int
    since: datetime | None
    sync_ids: tuple[str, ...]
    header: dict[str, Any]


def journal_summaries(root: Path) -> list[JournalSummary]:
    """Every readable journal under `root` (a missing folder has none)."""
    if not root.is_dir():
        return []
    found = []
    for path in sorted(root.glob(f"*{SUFFIX}")):
        contents = _read(path)
        if contents is None:
            continue
        header = contents.header
        found.append(JournalSummary(str(header["namespace"]), path, len(contents.index),
                                    _started(header), tuple(contents.sync_ids), header))
    return found


def damaged_journals(root: Path) -> list[Path]:
    """The journal files under `root` whose header cannot be read (torn or altered)."""
    if not root.is_dir():
        return []
    return [path for path in sorted(root.glob(f"*{SUFFIX}")) if _read(path) is None]


class JournalBook:
    """The journals of one sync: finds what an interrupted sync left, opens one per
    namespace (resumed or new).

    `resume_within` (seconds; 0 never resumes) bounds the age of a journal that is
    reused; `restart` starts every namespace afresh.
    """

    def __init__(self, root: Path, identity: JournalIdentity, *, sync_id: str, started_at: datetime,
                 resume_within: float, restart: bool = False) -> None:
        self.root = root
        self.identity = identity
        self.sync_id = sync_id
        self.started_at = started_at
        self.resume_within = resume_within
        self.restart = restart
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        #: namespace -> its journal, when one may be resumed
        self.resumable: dict[str, JournalSummary] = {}
        if not restart and resume_within > 0:
            for path in damaged_journals(root):
                logger.warning("the journal %s cannot be read (its header is damaged): it is "
                               "ignored, and its namespace is read afresh", path)
            for summary in journal_summaries(root):
                if self._usable(summary, say=False):
                    self.resumable[summary.namespace] = summary

    def _usable(self, summary: JournalSummary, *, say: bool) -> bool:
        reason = self.identity.mismatch(summary.header)
        if reason is None and (summary.since is None or
                               self.started_at - summary.since > timedelta(seconds=self.resume_within)):
            reason = f"it is older than resume_within ({self.resume_within:g} s)"
        if reason is not None and say:
            logger.warning("namespace %s: the journal of an interrupted sync is ignored: %s; "
                           "reading it afresh", summary.namespace, reason)
        return reason is None

    def forget(self, namespace: str) -> None:
        """Delete the namespace's journal: its read was committed after all (the process
        was killed between the commit and the journal's deletion)."""
        summary = self.resumable.pop(namespace, None)
        if summary is not None:
            summary.path.unlink(missing_ok=True)

    def interrupted_syncs(self) -> dict[str, set[str]]:
        """namespace -> the syncs whose read of it the resumable journal continues."""
        return {ns: set(summary.sync_ids) for ns, summary in self.resumable.items()}

    def path(self, namespace: str) -> Path:
        folder = namespace_folder(self.root, namespace)
        return folder.with_name(folder.name + SUFFIX)

    def open(self, namespace: str) -> RequestJournal:
        """The namespace's journal: the interrupted read's, resumed (its torn tail cut
        off), or a new one."""
        path = self.path(namespace)
        contents = None if self.restart else _read(path)
        if contents is not None and str(contents.header.get("namespace")) != namespace:
            contents = None
        if contents is not None:
            summary = JournalSummary(namespace, path, len(contents.index), _started(contents.header),
                                     tuple(contents.sync_ids), contents.header)
            if self.resume_within > 0 and self._usable(summary, say=True):
                if contents.intact < contents.size:
                    logger.warning("namespace %s: the journal's last %d bytes were torn (the process "
                                   "was killed while writing them); they are dropped",
                                   namespace, contents.size - contents.intact)
                    os.truncate(path, contents.intact)
                journal = RequestJournal(path, kept=contents.index, since=summary.since)
                journal._append({"sync_id": self.sync_id})
                since = summary.since.astimezone().strftime("%H:%M") if summary.since else "?"
                logger.info("namespace %s: resuming, %s requests kept from %s", namespace,
                            f"{journal.kept:,}", since)
                return journal
        path.unlink(missing_ok=True)
        journal = RequestJournal(path)
        journal._append(self.identity.header(namespace, self.sync_id, self.started_at))
        return journal
