"""`diligence replay --evidence STORE --warehouse NEW [--until SYNC_ID]`: the warehouse again,
from the evidence alone.

Each sealed sync of the store's chain, in order, is run again as a sync
(:func:`diligence.sync.run_sync`) with its own id and time, through a transport that
answers every request from that sync's manifest (:class:`EvidenceTransport`) instead of
the network: the same parser, the same loads, the same history. It reads the
namespaces the sync recorded an outcome for (an interrupted sync: those it committed),
with its ``--select``. Then the models are built. ``raw`` of NEW equals ``raw`` of the
original, row versions included; it is also how a parser fix reaches past syncs.

What a sync did not keep is not replayed: a request that failed (a namespace whose read
failed fails again, saying its answer is not in the evidence), document downloads (the
files are not in the store). NEW keeps evidence of its own (a replay's manifests name
the sync they replay), so ``diligence verify --warehouse NEW`` works.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from pipelines.company_connections import settings as s
from pipelines.evidence.manifest import Entry, Manifest
from pipelines.evidence.store import ResponseStore, body_sha256

from ..errors import EvidenceError
from ..evidence.bucket import bucket_at, pull_whole
from ..evidence.chain import parse_time, read_store
from ..steps import analytics_step
from ..sync import Replaying, run_sync, source_settings
from ..warehouse import Warehouse
from ..warehouse.storage import is_s3_url

__all__ = ["EvidenceTransport", "ReplayResult", "replay"]

log = logging.getLogger("diligence.evidence")

#: the token the transport answers login and renewal with (it holds no secret)
REPLAY_TOKEN = "replay-of-kept-evidence"
_AUTH_PATHS = (s.LOGIN_PATH, s.RENEW_TOKEN_PATH)


class EvidenceTransport(httpx.AsyncBaseTransport):
    """Answers each request with the response a sync's manifest recorded for it (by
    method, path with query, and namespace), read from the store and checked against
    its hash; login and renewal with a token of no value. A request the manifest has
    no answer for fails as a connection error, never as a 404 (which would retire rows)."""

    def __init__(self, manifest: Manifest, store: ResponseStore) -> None:
        self.manifest = manifest
        self.store = store
        self.answers: dict[tuple[str, str, str | None], Entry] = {
            e.key: e for e in manifest.entries if e.note != "file"}
        self.answered = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.raw_path.decode("ascii")
        if request.url.path.rstrip("/").endswith(_AUTH_PATHS):
            return httpx.Response(200, json={"token": REPLAY_TOKEN}, request=request)
        header = request.headers.get(s.NAMESPACE_HEADER)
        namespace = header.rsplit("/", 1)[-1] if header else None
        entry = self.answers.get((request.method, path, namespace))
        if entry is None:
            raise httpx.ConnectError(f"no answer to {request.method} {request.url.path} in the evidence of "
                                     f"sync {self.manifest.sync_id}", request=request)
        try:
            body = self.store.get(entry.sha256, entry.size)
        except OSError as exc:
            raise EvidenceError(f"response {entry.sha256} of sync {self.manifest.sync_id} cannot be read ({exc}); "
                                "run `diligence verify`") from None
        if body_sha256(body) != entry.sha256:
            raise EvidenceError(f"response {entry.sha256} of sync {self.manifest.sync_id} was altered; "
                                "run `diligence verify`")
        headers = {"content-type": "application/json"}
        if entry.note:
            headers["link"] = entry.note
        self.answered += 1
        return httpx.Response(entry.status, headers=headers, content=body, request=request)


@dataclass
class ReplayedSync:
    sync_id: str
    namespaces: int
    failed: int
    responses: int
    seconds: float


@dataclass
class ReplayResult:
    syncs: list[ReplayedSync] = field(default_factory=list)
    analytics: Any = None
    head: str | None = None


def _plan(store_root: Path, until: str | None, shown: str) -> list[Manifest]:
    """The sealed syncs of the store at `store_root` (`shown`: as the user named it) to
    replay, in order, up to `until`."""
    if not (store_root / "syncs").is_dir():
        raise EvidenceError(f"no evidence store at {shown}: it has no syncs/ folder")
    store = read_store(store_root)
    problems = store.problems()
    if problems:
        raise EvidenceError(f"the evidence chain of {shown} does not hold ({problems[0]}): run "
                            "`diligence verify` first")
    syncs = [m for m in store.ordered() if m.header.get("kind", "sync") in ("sync", "replay")]
    if until is not None:
        ids = [m.sync_id for m in syncs]
        if until not in ids:
            span = f"{ids[0]} to {ids[-1]}" if ids else "none"
            raise EvidenceError(f"--until {until}: no such sync in the chain (syncs kept: {span})")
        syncs = syncs[: ids.index(until) + 1]
    if not syncs:
        raise EvidenceError(f"no sealed sync in {shown}: nothing to replay")
    return syncs


def _namespaces(manifest: Manifest) -> list[str]:
    """What the sync recorded an outcome for (an interrupted one: what it committed)."""
    interrupted = (manifest.seal or {}).get("how") == "interrupted"
    return [ns for ns, (status, _error) in manifest.outcomes.items() if status == "committed" or not interrupted]


def replay(store: str | Path, owner: Warehouse, *, until: str | None = None, models: bool = True,
           on_sync: Callable[[ReplayedSync], None] | None = None) -> ReplayResult:
    """Rebuild `owner` (a new warehouse) from the evidence store `store` (a folder, or a
    bucket ``s3://bucket/prefix/``, copied in first), sync by sync up to `until` (see the
    module docstring)."""
    if owner.exists():
        raise EvidenceError(f"{owner.display()} already exists: a replay builds a new warehouse; name a new one")
    bucket = bucket_at(str(store)) if is_s3_url(store) else None
    store_root = (bucket.local if bucket is not None else Path(store)).expanduser().resolve()
    if owner.evidence_root is not None and owner.evidence_root.resolve() == store_root:
        raise EvidenceError("the new warehouse's evidence would be the store replayed: pass --evidence elsewhere")
    if bucket is not None:  # only once the replay may go ahead: a bucket may hold gigabytes
        pull_whole(bucket)
    syncs = _plan(store_root, until, str(store))
    responses = ResponseStore(store_root)
    result = ReplayResult()
    for manifest in syncs:
        namespaces = _namespaces(manifest)
        synced_at = parse_time(manifest.header.get("synced_at"))
        if not namespaces or synced_at is None:
            continue
        transport = EvidenceTransport(manifest, responses)
        settings = source_settings(base_url=str(manifest.header["base_url"]), email="replay@evidence.invalid",
                                   password=REPLAY_TOKEN, access_token=None, token_store_path=None,
                                   namespaces=namespaces, max_attempts=1, allow_insecure_http=True)
        settings.requests_per_second = None  # nothing to spare: the answers are local
        resources = manifest.header.get("resources")
        began = time.perf_counter()
        synced = run_sync(owner, settings, resources=tuple(resources) if resources else None,
                          replaying=Replaying(manifest.sync_id, synced_at, transport,
                                              str((manifest.seal or {}).get("hash"))))
        done = ReplayedSync(manifest.sync_id, len(synced.namespaces), len(synced.failed), transport.answered,
                            time.perf_counter() - began)
        result.syncs.append(done)
        result.head = synced.evidence_head or result.head
        if on_sync is not None:
            on_sync(done)
    if models and result.syncs:
        result.analytics = analytics_step(owner)
    return result
