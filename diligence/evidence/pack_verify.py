"""`diligence verify DIR`: an auditor's pack checked on its own (no warehouse, no service).

See :mod:`.pack` for what a pack holds. Checked, each failure one line:

1. every file of ``responses/`` hashes to its name, and each response an entry names is there;
2. each entry proves into its sync's Merkle root (``seal.merkle``);
3. each sync's seal is the hash of its content (header, outcomes, how it was sealed, the
   break it recorded) with its Merkle root and the seal before it; each links to the one
   before; the last is the pack's head (and, with ``--head``, the head kept elsewhere is
   one of the chain's);
4. each record's response is an entry of the sync it names, and parsing it again gives
   the record, column by column;
5. ``index.html``, ``README.md`` and ``records/`` are what ``pack.json`` renders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from pipelines.company_connections import settings as s
from pipelines.company_connections.manifest import (
    Entry,
    content_digest,
    leaf_hash,
    manifest_hash,
    root_of_proof,
)
from pipelines.company_connections.store import body_sha256

from ..errors import EvidenceError
from .pack import PACK_FILE, PACK_TABLES, PACK_VERSION
from .render import render_files
from .verify import Verification, check_rows, find_head

__all__ = ["is_pack", "verify_pack"]


def is_pack(path: Path) -> bool:
    return (Path(path) / PACK_FILE).is_file()


def _load(folder: Path) -> dict[str, Any]:
    try:
        pack = orjson.loads((folder / PACK_FILE).read_bytes())
    except FileNotFoundError:
        raise EvidenceError(f"{folder} is not an evidence pack: it has no {PACK_FILE}") from None
    except orjson.JSONDecodeError as exc:
        raise EvidenceError(f"{folder / PACK_FILE} is not readable JSON ({exc}): the pack was damaged") from None
    if not isinstance(pack, dict) or pack.get("pack") != PACK_VERSION:
        raise EvidenceError(f"{folder / PACK_FILE} is not an evidence pack of version {PACK_VERSION}")
    return pack


def _responses(folder: Path, result: Verification) -> dict[str, bytes]:
    kept: dict[str, bytes] = {}
    responses = folder / "responses"
    for path in sorted(responses.iterdir()) if responses.is_dir() else []:
        sha = path.name.removesuffix(".json")
        body = path.read_bytes()
        actual = body_sha256(body)
        if actual != sha:
            result.problems.append(f"responses/{path.name} was altered: its bytes hash to {actual}")
        else:
            kept[sha] = body
    result.responses = len(kept)
    return kept


def _chain(pack: dict[str, Any], result: Verification) -> dict[str, list[Entry]]:
    """Check the syncs' seals, links and entries; their entries that prove, by sync id."""
    entries: dict[str, list[Entry]] = {}
    previous: str | None = None
    for position, sync in enumerate(pack.get("syncs", [])):
        sync_id, seal = sync.get("sync_id"), sync.get("seal") or {}
        outcomes = {str(ns): (str(status), error) for ns, status, error in sync.get("outcomes", [])}
        content = content_digest(sync.get("header", {}), outcomes, str(seal.get("how")), seal.get("break"))
        if manifest_hash(seal.get("previous"), content, str(seal.get("merkle"))) != seal.get("hash"):
            result.problems.append(f"sync {sync_id} in {PACK_FILE} was edited: its manifest does not hash to its seal")
        if position and seal.get("previous") != previous:
            result.problems.append(f"sync {sync_id} in {PACK_FILE} does not follow the sync before it in the chain")
        previous = seal.get("hash")
        proven = entries.setdefault(str(sync_id), [])
        for item in sync.get("entries", []):
            entry = Entry.of(item["record"])
            if root_of_proof(leaf_hash(entry), item.get("proof", [])) != seal.get("merkle"):
                result.problems.append(f"sync {sync_id} in {PACK_FILE}: the entry of {entry.method} {entry.path} "
                                       "is not in its manifest (its Merkle proof fails)")
            else:
                proven.append(entry)
    result.syncs = len(pack.get("syncs", []))
    result.head = previous
    if previous != pack.get("head"):
        result.problems.append(f"the head in {PACK_FILE} ({str(pack.get('head'))[:12]}) is not the last seal of "
                               "its chain")
    return entries


def _records(pack: dict[str, Any], entries: dict[str, list[Entry]], bodies: dict[str, bytes],
             result: Verification) -> None:
    for table in PACK_TABLES:
        checkable = []
        for row in pack.get("records", {}).get(table, []):
            sha, sync_id = row.get("response_sha256"), row.get("sync_id")
            if sha is None:
                result.before_evidence += 1
            elif not any(e.sha256 == sha for e in entries.get(str(sync_id), [])):
                result.problems.append(f"records.{table} {row.get('company_id')} of {row.get('namespace_company_id')}: "
                                       f"its response {sha[:12]} is not an entry of sync {sync_id}")
            elif sha not in bodies:
                result.problems.append(f"records.{table} {row.get('company_id')} of {row.get('namespace_company_id')}: "
                                       f"its response {sha[:12]} is not in responses/ (or was altered)")
            else:
                checkable.append(row)

        def lists_of(sha: str, namespace: str, rows: list[dict[str, Any]] = checkable) -> list[bytes]:
            sync_id = next(r["sync_id"] for r in rows if r["response_sha256"] == sha)
            pages = sorted((e.fetched_at, e.sha256) for e in entries.get(sync_id, [])
                           if e.namespace == namespace and e.path.split("?")[0].endswith(s.CONNECTIONS_PATH))
            return [bodies[page] for _at, page in pages if page in bodies]

        before = len(result.problems)
        result.rows += check_rows(table, checkable, bodies.__getitem__, lists_of, result.problems)
        result.problems[before:] = [p.replace("raw.", "records.", 1) for p in result.problems[before:]]


def _rendered(folder: Path, pack: dict[str, Any], result: Verification) -> None:
    for name, text in render_files(pack).items():
        path = folder / name
        try:
            found = path.read_bytes()  # as bytes: a counterparty's text may hold a lone CR
        except OSError:
            result.problems.append(f"{name} is missing or not readable")
            continue
        if found != text.encode("utf-8"):
            result.problems.append(f"{name} was altered: it is not what {PACK_FILE} holds")


def verify_pack(folder: Path, *, head: str | None = None) -> Verification:
    """Verify the pack in `folder` on its own (see the module docstring)."""
    folder = Path(folder)
    pack = _load(folder)
    result = Verification()
    bodies = _responses(folder, result)
    entries = _chain(pack, result)
    for sync_id, proven in entries.items():
        for entry in proven:
            if entry.sha256 not in bodies and not any(p.startswith(f"responses/{entry.sha256}")
                                                      for p in result.problems):
                result.problems.append(f"response {entry.sha256} of sync {sync_id} ({entry.method} {entry.path}) "
                                       "is missing from responses/")
    _records(pack, entries, bodies, result)
    _rendered(folder, pack, result)
    if head is not None and find_head([str(sync.get("seal", {}).get("hash")) for sync in pack.get("syncs", [])],
                                      head) is None:
        result.problems.append(f"the head kept elsewhere ({head.strip()[:64]}) is not in this pack's chain")
    return result
