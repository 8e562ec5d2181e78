"""The evidence store in a bucket, shared by workers on many machines.

With ``[evidence] path = "s3://bucket/evidence/"`` (or ``DILIGENCE_EVIDENCE``, never
inside the lake's data path) the bucket holds the store, and each machine works on a
copy of it in its cache (:attr:`~diligence.warehouse.Warehouse.evidence_root`), kept in
step here. The bucket's objects mirror the folder's files::

    <prefix>responses/<2 hex>/<sha256>.gz           as in the folder (written once)
    <prefix>entries/<2 hex>/<sha256>.gz             as in the folder (written once)
    <prefix>syncs/<sync_id>.manifest.gz             a sealed manifest
    <prefix>syncs/HEAD                              the chain's head
    <prefix>syncs/<sync_id>.manifest.parts/<offset> a manifest being written, in the
                                                    pieces appended since the last push
    <prefix>syncs/<sync_id>.manifest.parts/live     its writer's heartbeat
    <prefix>syncs/.chain-lock                       held while a manifest is sealed

- :meth:`EvidenceBucket.pull` (before a sync plans its resume) copies in the sealed
  manifests this machine lacks, and the manifests that a worker left unsealed and no
  longer writes (no heartbeat for :attr:`EvidenceBucket.stale_seconds`) with the
  responses they refer to: a namespace killed on one machine resumes on another.
  A manifest another worker is still writing is left alone.
- :meth:`EvidenceBucket.push` (every second while a sync runs, and when it ends) sends
  the responses a manifest of this machine refers to *before* the manifest's new
  records, so the bucket never holds a record whose bytes it lacks; a sync killed loses
  about a second of its fetch. Its writer's heartbeat (a new piece, or the ``live``
  marker when there is none) comes at least every ``[evidence] heartbeat_seconds``.
- :meth:`EvidenceBucket.chain_lock` is held while a manifest is sealed: the bucket's
  lock (an object created only if absent, S3's conditional write), then the sealed
  manifests this machine lacks (the seal finds the last one among them); the sealed
  manifest, its table and the new head go up before the lock is given back. One chain,
  whichever machine seals.

Whoever can write the bucket chooses its keys and their sizes: every key is checked
against the store's layout before it becomes a file name here (a key the layout does not
allow is never copied, and ``verify`` names it), every object is copied in pieces up to a
bound, and written inside this machine's copy only, never through a link
(:mod:`pipelines.evidence.confined`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any

from pipelines.evidence.confined import (
    is_sync_id,
    open_file,
    remove_file,
    shown,
    store_parts,
    write_file,
)
from pipelines.evidence.errors import EvidenceFileError
from pipelines.evidence.manifest import (
    HEAD,
    SEALED_SUFFIX,
    SUFFIX,
    Entry,
    manifest_paths,
    read_appended,
    read_manifest,
)
from pipelines.evidence.sealing import chain_links, folder_lock
from pipelines.evidence.store import (
    ENTRIES,
    MAX_TABLE,
    RESPONSES,
    SYNCS,
    FileModes,
    make_folder,
)
from pipelines.secrets import redact

from ..config import DEFAULT_HEARTBEAT_SECONDS, heartbeat_seconds
from ..config import DEFAULT_LOCK_WAIT_SECONDS as LOCK_WAIT_SECONDS
from ..errors import EvidenceError
from ..warehouse import Warehouse
from ..warehouse.lock import process_alive
from ..warehouse.storage import ObjectStorage, S3Url, object_storage, working_copy

__all__ = ["EvidenceBucket", "bucket_at", "bucket_of", "kept_in_step", "pull_chain_of",
           "pull_everything", "pull_whole"]

log = logging.getLogger("diligence.evidence")

PARTS = ".parts/"
LIVE = "live"
LOCK = ".chain-lock"
#: heartbeats missed after which a manifest's writer is taken for gone
MISSED_HEARTBEATS = 6
#: a chain lock older than this was left by a worker that died while sealing
LOCK_STALE_SECONDS = 120.0
#: seconds between two pushes of what a sync appended to its manifest (a worker that
#: dies loses about this much of its fetch; the heartbeat says it is alive meanwhile)
PUSH_SECONDS = 1.0
_TRANSFERS = 16
#: the largest object copied in (a response's gzip, an entries table, a manifest or a
#: piece of one): the store's own bound on what it reads
_MAX_OBJECT = MAX_TABLE
_PIECE_DIGITS = 16


@dataclass
class _Listing:
    """What the bucket's ``syncs/`` holds."""

    now: datetime
    sealed: set[str] = field(default_factory=set)
    #: sync id -> {offset: key} of an unsealed manifest's pieces
    parts: dict[str, dict[int, str]] = field(default_factory=dict)
    #: sync id -> when its pieces or heartbeat were last written
    touched: dict[str, datetime] = field(default_factory=dict)
    head: bool = False
    #: the store's relative path -> the bucket's ETag of the sealed manifests
    etags: dict[str, str] = field(default_factory=dict)
    #: keys under ``syncs/`` the store's layout does not allow (never copied)
    strays: list[str] = field(default_factory=list)


class EvidenceBucket:
    """The evidence store at `url`, mirrored by the folder `local` (see the module)."""

    def __init__(self, url: str, local: Path, storage: ObjectStorage, *,
                 modes: FileModes | None = None, heartbeat: float = DEFAULT_HEARTBEAT_SECONDS) -> None:
        self.place = S3Url.parse(url)
        self.local = local
        self.storage = storage
        self.modes = modes or FileModes()
        self.heartbeat = heartbeat
        #: a manifest not pushed for this long is no longer written by anyone
        self.stale_seconds = heartbeat * MISSED_HEARTBEATS
        self._client = storage.client()
        #: sync id -> bytes of its manifest the bucket holds
        self._pushed: dict[str, int] = {}
        #: sync id -> the writer's pid, of this machine's manifests pushed before (each
        #: heartbeat reads only what they appended: a whole manifest of 100,000 entries
        #: takes 0.4 s to read, its last 2,000 entries 6 ms)
        self._writers: dict[str, Any] = {}
        #: responses known to be in the bucket
        self._present: set[str] = set()
        #: sync id -> when this process last showed the bucket its writer is alive
        self._alive: dict[str, float] = {}
        #: keys of the bucket the store's layout does not allow, seen by the last pull
        self.strays: list[str] = []
        self._push_lock = threading.Lock()
        self.host = socket.gethostname()

    def __repr__(self) -> str:
        return f"EvidenceBucket({str(self.place)!r})"

    @property
    def syncs(self) -> Path:
        return self.local / SYNCS

    def unreadable(self, exc: BaseException) -> str:
        """One line for a bucket that could not be read (boto's error, no secret in it)."""
        return f"cannot read the evidence store {self.place}: {redact(_first_line(exc), self.storage.secrets)}"

    # -- the bucket's objects --------------------------------------------------------
    def _key(self, relative: str) -> str:
        return self.place.key(relative)

    def _object(self, key: str) -> Any:
        """The bucket's answer for the object `key` (None: it is not there); refused
        (:class:`EvidenceFileError`) when it is larger than anything the store holds."""
        try:
            answer = self._client.get_object(Bucket=self.place.bucket, Key=key)
        except self._client.exceptions.NoSuchKey:
            return None
        if int(answer.get("ContentLength") or 0) > _MAX_OBJECT:
            answer["Body"].close()
            raise EvidenceFileError(f"{self.place.bucket}/{shown(key)} holds more than {_MAX_OBJECT:,} bytes: not read")
        return answer

    def _get(self, relative: str) -> bytes | None:
        answer = self._object(self._key(relative))
        return None if answer is None else answer["Body"].read(_MAX_OBJECT + 1)[:_MAX_OBJECT]

    def _put(self, relative: str, body: bytes, *, only_new: bool = False) -> bool:
        """Write an object; with `only_new`, only if absent (False: it was there)."""
        extra = {"IfNoneMatch": "*"} if only_new else {}
        try:
            self._client.put_object(Bucket=self.place.bucket, Key=self._key(relative), Body=body, **extra)
        except self._client.exceptions.ClientError as exc:
            if only_new and exc.response.get("Error", {}).get("Code") in ("PreconditionFailed", "412"):
                return False
            raise
        return True

    def _list(self, relative: str) -> tuple[list[dict[str, Any]], datetime]:
        """The objects under `relative`, and the bucket's clock (its answer's ``Date``)."""
        found: list[dict[str, Any]] = []
        now = datetime.now(timezone.utc)
        token: str | None = None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            answer = self._client.list_objects_v2(
                Bucket=self.place.bucket, Prefix=self._key(relative), **extra)
            date = answer.get("ResponseMetadata", {}).get("HTTPHeaders", {}).get("date")
            if date:
                now = parsedate_to_datetime(date)
            found += answer.get("Contents", [])
            if not answer.get("IsTruncated"):
                return found, now
            token = answer["NextContinuationToken"]

    def _listing(self) -> _Listing:
        objects, now = self._list(SYNCS + "/")
        listing = _Listing(now)
        start = len(self._key(SYNCS + "/"))
        for item in objects:
            name = item["Key"][start:]
            sync_id, _, piece = name.partition(SUFFIX + PARTS)
            if name == HEAD:
                listing.head = True
            elif name == LOCK:
                continue
            elif name.endswith(SEALED_SUFFIX) and is_sync_id(name.removesuffix(SEALED_SUFFIX)):
                listing.sealed.add(name.removesuffix(SEALED_SUFFIX))
                listing.etags[f"{SYNCS}/{name}"] = item["ETag"]
            elif piece and is_sync_id(sync_id) and (piece == LIVE or (
                    len(piece) == _PIECE_DIGITS and piece.isdigit() and piece.isascii())):
                if piece != LIVE:
                    listing.parts.setdefault(sync_id, {})[int(piece)] = item["Key"]
                touched = item["LastModified"]
                if sync_id not in listing.touched or touched > listing.touched[sync_id]:
                    listing.touched[sync_id] = touched
            else:
                listing.strays.append(f"{self.place.bucket}/{shown(item['Key'])}")
        return listing

    # -- local files -----------------------------------------------------------------
    def _write_local(self, relative: str, body: bytes | Iterable[bytes]) -> None:
        """Write `body` to this machine's copy at `relative` (a name the store's layout
        allows; inside the copy, never through a link)."""
        write_file(self.local, store_parts(relative), body, mode=self.modes.file, folder_mode=self.modes.folder,
                   limit=_MAX_OBJECT)

    def _fetch_all(self, relatives: Iterable[str], etags: dict[str, str] | None = None) -> None:
        """Copy in the objects at `relatives` this folder lacks (several at once); with
        `etags` (the bucket's, by relative path), also those whose bytes here differ
        from the bucket's, so that what is read here is what the bucket holds."""
        missing = [r for r in dict.fromkeys(relatives)
                   if not (self.local / r).is_file() or _differs(self.local, r, (etags or {}).get(r))]

        def fetch(relative: str) -> None:
            answer = self._object(self._key(relative))
            if answer is not None:
                self._write_local(relative, answer["Body"].iter_chunks(1 << 20))

        with ThreadPoolExecutor(_TRANSFERS) as pool:
            list(pool.map(fetch, missing))

    def _send_all(self, relatives: Iterable[str]) -> None:
        """Send the local files at `relatives` the bucket lacks (several at once)."""
        wanted = [r for r in dict.fromkeys(relatives)
                  if r not in self._present and (self.local / r).is_file()]

        def send(relative: str) -> None:  # written once: one that is there is not replaced
            with open_file(self.local, store_parts(relative)) as file:
                self._put(relative, file.read(_MAX_OBJECT + 1)[:_MAX_OBJECT], only_new=True)
            self._present.add(relative)

        with ThreadPoolExecutor(_TRANSFERS) as pool:
            list(pool.map(send, wanted))

    # -- pull ------------------------------------------------------------------------
    def pull_chain(self, *, everything: bool = False) -> _Listing:
        """Copy in the chain: the sealed manifests this machine lacks (`everything`: and
        those whose bytes differ from the bucket's) and the head. Returns the listing."""
        listing = self._listing()
        make_folder(self.syncs, self.modes)
        self._fetch_all((f"{SYNCS}/{sync_id}{SEALED_SUFFIX}" for sync_id in listing.sealed),
                        listing.etags if everything else None)
        if listing.head:
            head = self._get(f"{SYNCS}/{HEAD}")
            if head is not None:
                self._write_local(f"{SYNCS}/{HEAD}", head)
        return listing

    def pull(self, *, everything: bool = False) -> None:
        """Bring this machine's copy in step (see the module docstring); `everything`:
        every response and entries table too (what ``verify`` and a pack read)."""
        listing = self.pull_chain(everything=everything)
        self.strays = list(listing.strays)
        for sync_id in listing.sealed:  # sealed elsewhere: no longer this machine's to seal
            remove_file(self.local, (SYNCS, f"{sync_id}{SUFFIX}"))
        for sync_id, pieces in listing.parts.items():
            if sync_id in listing.sealed:
                continue
            local = self.syncs / f"{sync_id}{SUFFIX}"
            idle = (listing.now - listing.touched[sync_id]).total_seconds()
            if idle < self.stale_seconds:
                if local.exists() and not self._written_here(local):
                    remove_file(self.local, (SYNCS, local.name))  # another worker's: not this machine's to resume
                continue
            body = self._assemble(pieces)
            if body is not None and (not local.exists() or local.stat().st_size < len(body)):
                self._write_local(f"{SYNCS}/{sync_id}{SUFFIX}", body)
            self._pushed[sync_id] = max(self._pushed.get(sync_id, 0), len(body or b""))
        tables: list[str] = []
        responses: list[str] = []
        for path in manifest_paths(self.syncs):
            manifest = read_manifest(path) if path.name.endswith(SUFFIX) else None
            if manifest is not None:
                responses += _response_files(manifest.entries)
        etags: dict[str, str] | None = None
        if everything:
            etags = {}
            for folder, found in ((ENTRIES, tables), (RESPONSES, responses)):
                objects, _now = self._list(folder + "/")
                for item in objects:
                    relative = item["Key"][len(self.place.prefix):]
                    try:
                        store_parts(relative)
                    except EvidenceFileError:
                        self.strays.append(f"{self.place.bucket}/{shown(item['Key'])}")
                        continue
                    found.append(relative)
                    etags[relative] = item["ETag"]
        self._fetch_all(tables + responses, etags)

    def _written_here(self, local: Path) -> bool:
        manifest = read_manifest(local)
        return manifest is not None and manifest.header.get("host") == self.host

    def _assemble(self, pieces: dict[int, str]) -> bytes | None:
        """A manifest from its pieces, each at its offset (pieces sent by two processes
        may overlap: the file is append-only, so they agree); None when one is missing."""
        body = bytearray()
        for offset in sorted(pieces):
            if offset > len(body):
                log.warning("a piece of a manifest in %s is missing at byte %d: resumed from before it",
                            self.place, len(body))
                break
            answer = self._object(pieces[offset])
            piece = answer["Body"].read(_MAX_OBJECT) if answer is not None else b""
            if offset + len(piece) > _MAX_OBJECT:
                raise EvidenceFileError(f"a manifest in {self.place} holds more than {_MAX_OBJECT:,} bytes: not read")
            body[offset:offset + len(piece)] = piece
        return bytes(body) if body else None

    # -- push ------------------------------------------------------------------------
    def push(self) -> None:
        """Send what this machine's own unsealed manifests added since the last push:
        first the responses their new records refer to, then the records, then the
        heartbeat of each one whose writer still runs."""
        with self._push_lock:
            for path in manifest_paths(self.syncs) if self.syncs.is_dir() else []:
                if path.name.endswith(SUFFIX):
                    self._push_manifest(path)

    def _push_manifest(self, path: Path) -> None:
        sync_id = path.name.removesuffix(SUFFIX)
        sent = self._pushed.get(sync_id, 0)
        if sync_id in self._writers:  # read before: only what was appended since
            appended = read_appended(path, sent)
            if appended is None:
                return
            entries, intact = appended
        else:
            manifest = read_manifest(path)
            if manifest is None or manifest.header.get("host") != self.host:
                return
            self._writers[sync_id] = manifest.header.get("pid")
            entries, intact = manifest.entries, manifest.intact
        now = time.monotonic()
        if intact > sent:  # a new piece: also a sign of life (its time is the manifest's)
            self._send_all(_response_files(entries))
            with open_file(self.local, (SYNCS, path.name)) as file:
                file.seek(sent)
                piece = file.read(intact - sent)
            self._put(f"{SYNCS}/{sync_id}{SUFFIX}{PARTS}{sent:016d}", piece)
            self._pushed[sync_id] = intact
            self._alive[sync_id] = now
        pid = self._writers[sync_id]
        if now - self._alive.get(sync_id, 0.0) >= self.heartbeat and isinstance(pid, int) and (
                pid == os.getpid() or process_alive(pid)):
            self._put(f"{SYNCS}/{sync_id}{SUFFIX}{PARTS}{LIVE}", b"")
            self._alive[sync_id] = now

    # -- sealing ---------------------------------------------------------------------
    @contextlib.contextmanager
    def chain_lock(self, manifest: Path) -> Iterator[None]:
        """Held while `manifest` is sealed: this folder's lock and the bucket's; the sealed
        manifests this machine lacks are copied in first (with the entries of the last
        ones: the seal reads the last seal whole), and what the seal wrote is sent before
        the bucket's lock is given back."""
        with folder_lock(manifest), self._bucket_lock():
            sync_id = manifest.name.removesuffix(SUFFIX)
            listing = self._listing()
            self._fetch_all(f"{SYNCS}/{sealed}{SEALED_SUFFIX}" for sealed in sorted(listing.sealed))
            head = self._get(f"{SYNCS}/{HEAD}") if listing.head else None
            if head is not None:
                self._write_local(f"{SYNCS}/{HEAD}", head)
            for end in chain_links(self.syncs).ends():
                last = read_manifest(self.syncs / f"{end.sync_id}{SEALED_SUFFIX}", entries=False)
                if last is not None and last.table:
                    self._fetch_all([_entries_file(last.table)])
            if sync_id in listing.sealed:  # another worker sealed it: seal() finds that one
                remove_file(self.local, (SYNCS, manifest.name))
            else:
                self._push_manifest(manifest)
            yield
            sealed = read_manifest(self.syncs / f"{sync_id}{SEALED_SUFFIX}", entries=False)
            if sealed is not None and sync_id not in listing.sealed:
                self._send_all([_entries_file(str(sealed.table)), f"{SYNCS}/{sync_id}{SEALED_SUFFIX}"])
                self._put(f"{SYNCS}/{HEAD}", (self.syncs / HEAD).read_bytes())
                self._drop_parts(sync_id, listing.parts.get(sync_id, {}))

    def _drop_parts(self, sync_id: str, pieces: dict[int, str]) -> None:
        keys = [*pieces.values(), self._key(f"{SYNCS}/{sync_id}{SUFFIX}{PARTS}{LIVE}")]
        objects, _now = self._list(f"{SYNCS}/{sync_id}{SUFFIX}{PARTS}")
        keys += [o["Key"] for o in objects]
        for start in range(0, len(keys), 1000):
            self._client.delete_objects(Bucket=self.place.bucket, Delete={
                "Objects": [{"Key": key} for key in dict.fromkeys(keys[start:start + 1000])],
                "Quiet": True})
        self._pushed.pop(sync_id, None)
        self._writers.pop(sync_id, None)

    @contextlib.contextmanager
    def _bucket_lock(self) -> Iterator[None]:
        key = f"{SYNCS}/{LOCK}"
        holder = json.dumps({"host": self.host, "pid": os.getpid(),
                             "at": datetime.now(timezone.utc).isoformat()}).encode()
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while not self._put(key, holder, only_new=True):
            objects, now = self._list(key)
            if objects and (now - objects[0]["LastModified"]).total_seconds() > LOCK_STALE_SECONDS:
                log.warning("the evidence chain's lock in %s was left by a worker that stopped "
                            "while sealing: taken over", self.place)
                self._client.delete_object(Bucket=self.place.bucket, Key=self._key(key))
                continue
            if time.monotonic() > deadline:
                raise EvidenceError(f"the evidence chain's lock in {self.place} was held for "
                                    f"{LOCK_WAIT_SECONDS:.0f} s: is a worker stuck sealing?")
            time.sleep(0.2)
        try:
            yield
        finally:
            self._client.delete_object(Bucket=self.place.bucket, Key=self._key(key))


def _differs(local: Path, relative: str, etag: str | None) -> bool:
    """True when the bucket's `etag` of an object written in one piece (its bytes' MD5)
    is not that of this machine's copy at `relative`, or the copy cannot be read; a
    multipart ETag, or none, is not compared."""
    etag = (etag or "").strip('"')
    if not etag or "-" in etag:
        return False
    digest = hashlib.md5(usedforsecurity=False)
    try:
        with open_file(local, store_parts(relative)) as file:
            while piece := file.read(1 << 20):
                digest.update(piece)
    except OSError:
        return True
    return digest.hexdigest() != etag


def _response_files(entries: Iterable[Entry]) -> list[str]:
    """The store's files of the responses `entries` refer to (not documents' files)."""
    return [f"{RESPONSES}/{e.sha256[:2]}/{e.sha256}.gz" for e in entries if e.note != "file"]


def _entries_file(table: str) -> str:
    return f"{ENTRIES}/{table[:2]}/{table}.gz"


def pull_everything(owner: Warehouse) -> list[str]:
    """Copy in the whole store from its bucket (nothing for a folder): what ``verify``
    and a pack read. Returns the bucket's keys the store's layout does not allow (not
    copied), one line each."""
    bucket = bucket_of(owner)
    if bucket is None:
        return []
    pull_whole(bucket)
    return [f"{key} is an object whose name the evidence store's layout does not allow: not copied"
            for key in bucket.strays]


def bucket_at(url: str, local: Path | None = None, *, modes: FileModes | None = None) -> EvidenceBucket:
    """The evidence bucket at `url` (``s3://bucket/prefix/``), mirrored by `local` (by
    default this machine's working copy of it)."""
    url = str(S3Url.parse(url))
    return EvidenceBucket(url, local or working_copy(url), object_storage(), modes=modes,
                          heartbeat=heartbeat_seconds())


def pull_whole(bucket: EvidenceBucket) -> None:
    """Copy in the whole store from `bucket` (what a replay reads); one line if it fails."""
    try:
        bucket.pull(everything=True)
    except Exception as exc:  # noqa: BLE001 - boto's errors, as one line
        raise EvidenceError(bucket.unreadable(exc)) from None


def pull_chain_of(owner: Warehouse) -> str | None:
    """Copy in the chain of `owner`'s evidence bucket (nothing for a folder), for
    ``diligence status``: None, or why the bucket could not be read (this machine's copy
    is shown then)."""
    bucket = bucket_of(owner)
    if bucket is None:
        return None
    try:
        bucket.pull_chain()
    except Exception as exc:  # noqa: BLE001 - boto's errors, as one line
        return bucket.unreadable(exc)
    return None


def bucket_of(owner: Warehouse, *, modes: FileModes | None = None) -> EvidenceBucket | None:
    """The bucket `owner`'s evidence lives in, or None (a folder, or no evidence)."""
    if owner.evidence_bucket is None or owner.evidence_root is None:
        return None
    return bucket_at(owner.evidence_bucket, owner.evidence_root, modes=modes)


@contextlib.contextmanager
def kept_in_step(owner: Warehouse, *, modes: FileModes | None = None) -> Iterator[EvidenceBucket | None]:
    """While a step writes evidence: this machine's copy pulled first, then pushed every
    heartbeat and once more at the end. Yields the bucket (None: a folder)."""
    bucket = bucket_of(owner, modes=modes)
    if bucket is None:
        yield None
        return
    storage = bucket.storage
    try:
        bucket.pull()
    except Exception as exc:  # noqa: BLE001 - boto's errors, as one line
        raise EvidenceError(bucket.unreadable(exc), transient=True) from None
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(min(bucket.heartbeat, PUSH_SECONDS)):
            try:
                bucket.push()
            except Exception as exc:  # noqa: BLE001 - the next beat tries again
                log.warning("the evidence store %s did not take this sync's latest records: %s",
                            bucket.place, redact(_first_line(exc), storage.secrets))

    thread = threading.Thread(target=beat, name="evidence-heartbeat", daemon=True)
    thread.start()
    try:
        yield bucket
    finally:
        stop.set()
        thread.join()
        try:
            bucket.push()
        except Exception as exc:  # noqa: BLE001 - the sync's own outcome is what it reports
            log.warning("the evidence store %s did not take this sync's last records: %s",
                        bucket.place, redact(_first_line(exc), storage.secrets))


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__

