"""What a sync keeps of what the service said: its responses and its manifest.

An :class:`EvidenceLog` is handed to the client for one sync. Each response the client
parses (and each authoritative 403/404) is kept in the :class:`~.store.ResponseStore` by
the SHA-256 of its bytes and recorded in the sync's manifest
(:class:`~.sealing.ManifestWriter`); the client tells its caller which response(s) an
answer came from (:func:`last_answer`), so every row can name its response.

An interrupted sync's unsealed manifest is this log's :class:`Kept` answers: the child
requests it completed (companies, connection details, questionnaires, templates,
documents) are answered from the store instead of the service, and recorded again in
the new manifest with their original time and the interrupted sync's id. User-info and
the connection lists are always asked again, so a connection removed since is retired,
not loaded from the old answer.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Collection, Iterable
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from pipelines.evidence.errors import EvidenceFileError
from pipelines.evidence.manifest import Entry, Manifest
from pipelines.evidence.sealing import ChainLock, ManifestWriter
from pipelines.evidence.store import FileModes, ResponseStore, body_sha256

from .schema import TABLE_COLUMNS

__all__ = [
    "Answer",
    "EvidenceLog",
    "Kept",
    "ManifestIdentity",
    "SCHEMA_DIGEST",
    "account_digest",
    "last_answer",
]

logger = logging.getLogger("diligence.evidence")

#: A digest of the raw tables' columns: answers kept for other tables are not reused.
SCHEMA_DIGEST = hashlib.sha256(
    orjson.dumps(TABLE_COLUMNS, option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()[:16]


def account_digest(base_url: str, account: str | None) -> str:
    """Who a manifest belongs to, without keeping the account's name in the file."""
    return hashlib.sha256(f"{base_url}\x00{(account or '').lower()}".encode()).hexdigest()[:16]


@dataclass(frozen=True)
class ManifestIdentity:
    """What a sync's manifest says of it, and what must match for an interrupted sync's
    answers to be reused: base URL, account, the warehouse, selection, schema."""

    base_url: str
    #: :func:`account_digest` of the base URL and the login (email; empty in token-only mode)
    account: str
    #: the data resources the sync loads (None: all)
    resources: tuple[str, ...] | None = None
    #: the warehouse loaded (a file's absolute path, or a lake's URI without password)
    warehouse: str = ""

    @classmethod
    def of(cls, base_url: str, email: str | None, resources: Collection[str] | None = None,
           warehouse: str = "") -> ManifestIdentity:
        url = base_url.rstrip("/")
        return cls(url, account_digest(url, email),
                   tuple(sorted(resources)) if resources is not None else None, warehouse)

    def header(self) -> dict[str, Any]:
        return {"base_url": self.base_url, "account": self.account, "warehouse": self.warehouse,
                "resources": list(self.resources) if self.resources is not None else None,
                "schema": SCHEMA_DIGEST}

    def mismatch(self, header: dict[str, Any]) -> str | None:
        """Why answers of a manifest with `header` must not be reused (None: they may)."""
        if header.get("schema") != SCHEMA_DIGEST:
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


@dataclass(frozen=True)
class Answer:
    """Where a call's answer came from: the response of each page, and whether it was
    kept from an interrupted sync rather than asked now."""

    sha256s: tuple[str, ...]
    #: items per page (a list endpoint), in order; empty for one object
    page_items: tuple[int, ...] = ()
    kept: bool = False

    def for_item(self, index: int) -> str:
        """The response that carried the list's `index`-th item."""
        for sha, count in zip(self.sha256s, self.page_items, strict=False):
            if index < count:
                return sha
            index -= count
        return self.sha256s[-1]


_ANSWER: ContextVar[Answer | None] = ContextVar("diligence_answer", default=None)


def last_answer() -> Answer | None:
    """The answer of the client's last call in this task (None: no evidence is kept)."""
    return _ANSWER.get()


def set_answer(answer: Answer | None) -> None:
    _ANSWER.set(answer)


@dataclass
class Kept:
    """Answers of interrupted syncs, for the namespaces they did not commit: by request
    (method, path, namespace); a later sync's answer wins over an earlier one's."""

    entries: dict[tuple[str, str, str | None], Entry] = field(default_factory=dict)
    #: namespace -> (answers kept, when the interrupted read began)
    namespaces: dict[str, tuple[int, datetime | None]] = field(default_factory=dict)

    @classmethod
    def of(cls, manifests: Iterable[tuple[Manifest, Collection[str]]]) -> Kept:
        """From each interrupted manifest with the namespaces whose answers may be kept."""
        kept = cls()
        for manifest, namespaces in manifests:
            manifest.load_entries()
            since = manifest.started_at()
            for entry in manifest.entries:
                if entry.namespace in namespaces and entry.status in (200, 403, 404):
                    kept.entries[entry.key] = Entry(
                        entry.method, entry.path, entry.namespace, entry.status, entry.fetched_at,
                        entry.sha256, entry.size, entry.kept_from or manifest.sync_id, entry.note)
            for namespace in namespaces:
                count = sum(1 for e in manifest.entries if e.namespace == namespace)
                if count:
                    kept.namespaces[namespace] = (count, since)
        return kept

    def lookup(self, method: str, path: str, namespace: str | None) -> Entry | None:
        return self.entries.get((method, path, namespace))


class EvidenceLog:
    """One sync's evidence: the store its responses go to, its manifest, and the answers
    it may keep from interrupted syncs."""

    def __init__(self, store: ResponseStore, writer: ManifestWriter, kept: Kept | None = None) -> None:
        self.store = store
        self.writer = writer
        self.kept = kept or Kept()

    @classmethod
    def start(cls, root: Path, identity: ManifestIdentity, *, sync_id: str, started_at: datetime,
              synced_at: datetime, version: str, kept: Kept | None = None,
              kind: str = "sync", extra: dict[str, Any] | None = None,
              modes: FileModes | None = None, chain_lock: ChainLock | None = None) -> EvidenceLog:
        """A new manifest in the store at `root` (`kind`: ``sync``, ``documents``,
        ``replay``; `extra`: more of its header; `modes`: of its files, owner-only by
        default; `chain_lock`: held while it is sealed, see :data:`~.sealing.ChainLock`)."""
        store = ResponseStore(root, modes=modes)
        header = {"sync_id": sync_id, "kind": kind, "started_at": started_at.isoformat(),
                  "synced_at": synced_at.isoformat(), "version": version, **identity.header(),
                  **(extra or {})}
        return cls(store, ManifestWriter(store.syncs, header, store.modes, chain_lock), kept)

    def record(self, method: str, path: str, namespace: str | None, status: int, body: bytes,
               link: str | None = None) -> str:
        """Keep a response the service sent now (`link`: its ``Link`` header); its sha256."""
        sha = self.store.put(body)
        self.writer.entry(Entry(method, path, namespace, status, _now(), sha, len(body), None, link))
        return sha

    def record_file(self, path: str, namespace: str | None, sha256: str, size: int) -> None:
        """Record a downloaded document's file by its hash (its bytes are not kept here)."""
        self.writer.entry(Entry("GET", path, namespace, 200, _now(), sha256, size, None, "file"))

    def lookup(self, method: str, path: str, namespace: str | None) -> Entry | None:
        """An answer an interrupted sync completed for this request, if any."""
        return self.kept.lookup(method, path, namespace)

    def body(self, entry: Entry) -> bytes:
        """The bytes of a kept answer, checked against its entry's hash and size
        (:class:`~.errors.EvidenceFileError`, an OSError, when they are not its bytes)."""
        body = self.store.get(entry.sha256, entry.size)
        if len(body) != entry.size or body_sha256(body) != entry.sha256:
            raise EvidenceFileError(f"response {entry.sha256} was altered: it is not the answer its entry records")
        return body

    def reuse(self, entry: Entry) -> None:
        """Record in this sync's manifest an answer kept from an interrupted sync."""
        self.writer.entry(entry)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()
