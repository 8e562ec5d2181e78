"""`diligence verify DIR`: an auditor's pack checked on its own (no warehouse, no service).

See :mod:`.pack` for what a pack holds. Checked, each failure one line:

1. every file of ``responses/`` hashes to its name, and each response an entry names is there;
2. each entry proves into its sync's Merkle root (``seal.merkle``);
3. each sync's seal is the hash of its content (header, outcomes, how it was sealed, the
   break it recorded) with its Merkle root and the seal before it; each links to the one
   before; the last is the pack's head (and, with ``--head``, the head kept elsewhere is
   one of the chain's);
4. each record's response is an entry of the sync it names, and parsing it again gives
   the record, column by column; a record that names no response must be older than
   the evidence (the first sync the chain sealed);
5. the records are exactly those the listing names, table by table, and the pack's
   seal is the hash of that listing (with the company, the date and the head);
6. ``index.html``, ``README.md`` and ``records/`` are what ``pack.json`` renders.

A pack is read as someone else wrote it: no file is read through a link or past a
bounded size, and a ``pack.json`` that is not the shape of a pack is one line.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from pipelines.company_connections import settings as s
from pipelines.evidence.confined import is_sha256, listing, read_file, shown
from pipelines.evidence.manifest import Entry
from pipelines.evidence.merkle import (
    content_digest,
    leaf_hash,
    manifest_hash,
    root_of_proof,
)
from pipelines.evidence.store import MAX_BODY, MAX_TABLE, body_sha256

from ..errors import EvidenceError
from ..evidence.chain import parse_time
from .pack import PACK_FILE, PACK_TABLES, PACK_VERSION, listing_of, pack_seal
from .render import render_files
from .verify import ROW_KEYS, Verification, check_rows, find_head

__all__ = ["is_pack", "verify_pack"]


def is_pack(path: Path) -> bool:
    return (Path(path) / PACK_FILE).is_file()


def _load(folder: Path, result: Verification) -> dict[str, Any] | None:
    try:
        body = read_file(folder, (PACK_FILE,), MAX_TABLE)
    except FileNotFoundError:
        raise EvidenceError(f"{folder} is not an evidence pack: it has no {PACK_FILE}") from None
    except OSError as exc:
        result.problems.append(str(exc))
        return None
    try:
        pack = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise EvidenceError(f"{folder / PACK_FILE} is not readable JSON ({exc}): the pack was damaged") from None
    if not isinstance(pack, dict) or pack.get("pack") != PACK_VERSION:
        raise EvidenceError(f"{folder / PACK_FILE} is not an evidence pack of version {PACK_VERSION}")
    return pack


def _strays(folder: Path, result: Verification) -> None:
    """Links and special files anywhere in the pack's folders are named, never read."""
    for parts in ((), ("responses",), ("records",)):
        for name, kind in listing(folder, parts) if not parts or (folder / parts[0]).is_dir() else []:
            if kind not in ("file", "folder"):
                result.problems.append(f"{'/'.join((*parts, shown(name)))} is {kind}: not read")


def _responses(folder: Path, sizes: dict[str, int], result: Verification) -> dict[str, bytes]:
    kept: dict[str, bytes] = {}
    for name, kind in listing(folder, ("responses",)) if (folder / "responses").is_dir() else []:
        sha = name.removesuffix(".json")
        if kind != "file":
            continue  # named by _strays
        if not name.endswith(".json") or not is_sha256(sha):
            result.problems.append(f"responses/{shown(name)} is not named by a response's SHA-256")
            continue
        try:
            body = read_file(folder, ("responses", name), sizes.get(sha, MAX_BODY))
        except OSError as exc:
            result.problems.append(str(exc))
            continue
        actual = body_sha256(body)
        if actual != sha:
            result.problems.append(f"responses/{name} was altered: its bytes hash to {actual}")
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
        content = content_digest(sync.get("header", {}), sync.get("outcomes", []), str(seal.get("how")),
                                 seal.get("break"))
        if manifest_hash(seal.get("previous"), content, str(seal.get("merkle"))) != seal.get("hash"):
            result.problems.append(f"sync {sync_id} in {PACK_FILE} was edited: its manifest does not hash to its seal")
        if position and seal.get("previous") != previous:
            result.problems.append(f"sync {sync_id} in {PACK_FILE} does not follow the sync before it in the chain")
        previous = seal.get("hash")
        proven = entries.setdefault(str(sync_id), [])
        for item in sync.get("entries", []):
            entry = Entry.of(item["record"])
            if entry.problem() is not None or root_of_proof(leaf_hash(entry), item.get("proof", [])) \
                    != seal.get("merkle"):
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


def _began(pack: dict[str, Any]) -> datetime | None:
    """When the first sync the pack's chain sealed began: its first manifest's start if
    that one starts the chain, and the syncs its prunes removed."""
    syncs = pack.get("syncs", [])
    began = []
    if syncs and (syncs[0].get("seal") or {}).get("previous") is None:
        began.append(parse_time(syncs[0].get("header", {}).get("started_at")))
    for sync in syncs:
        for item in sync.get("header", {}).get("pruned") or []:
            began.append(parse_time(list(item)[2] if len(item) > 2 else None))
    return min((t for t in began if t is not None), default=None)


def _key(table: str, row: dict[str, Any]) -> str:
    return " ".join(str(row.get(c)) for c in ROW_KEYS[table])


def _records(pack: dict[str, Any], entries: dict[str, list[Entry]], bodies: dict[str, bytes],
             result: Verification) -> None:
    began = _began(pack)
    for table in PACK_TABLES:
        checkable = []
        for row in pack.get("records", {}).get(table, []):
            sha, sync_id = row.get("response_sha256"), row.get("sync_id")
            since = parse_time(row.get("_dlt_valid_from"))
            if sha is None and began is not None and (since is None or since >= began):
                result.problems.append(f"records.{table} {_key(table, row)} names no response, though it is not "
                                       f"older than the evidence ({began.isoformat()})")
            elif sha is None:
                result.before_evidence += 1
            elif not any(e.sha256 == sha for e in entries.get(str(sync_id), [])):
                result.problems.append(f"records.{table} {_key(table, row)}: its response {str(sha)[:12]} is not an "
                                       f"entry of sync {sync_id}")
            elif sha not in bodies:
                result.problems.append(f"records.{table} {_key(table, row)}: its response {sha[:12]} is not in "
                                       "responses/ (or was altered)")
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


def _listing(pack: dict[str, Any], result: Verification) -> None:
    """The records are the ones the listing names, and the seal covers the listing."""
    listed = pack.get("listing")
    if not isinstance(listed, dict):
        result.problems.append(f"{PACK_FILE} lists no records under a seal: it is not a whole pack")
        return
    found = listing_of(pack.get("records", {}))
    for table in PACK_TABLES:
        expected = listed.get(table) or {"count": 0, "keys": []}
        keys = {tuple(k) for k in expected.get("keys", [])}
        have = {tuple(k) for k in found[table]["keys"]}
        if expected.get("count") != len(expected.get("keys", [])):
            result.problems.append(f"the listing of records.{table} counts {expected.get('count')} records but names "
                                   f"{len(expected.get('keys', []))}")
        for key in sorted(keys - have):
            result.problems.append(f"records.{table} {' '.join(key)} is listed under the pack's seal, but missing")
        for key in sorted(have - keys):
            result.problems.append(f"records.{table} {' '.join(key)} is not listed under the pack's seal")
    if pack.get("seal") != pack_seal(pack):
        result.problems.append(f"the pack's seal in {PACK_FILE} is not the hash of its listing: the listing was edited")


def _rendered(folder: Path, pack: dict[str, Any], result: Verification) -> None:
    for name, text in render_files(pack).items():
        expected = text.encode("utf-8")
        try:  # as bytes: a counterparty's text may hold a lone CR
            found = read_file(folder, Path(name).parts, len(expected) + 1)
        except FileNotFoundError:
            result.problems.append(f"{name} is missing")
            continue
        except OSError as exc:
            larger = "holds more than" in str(exc)
            result.problems.append(f"{name} was altered: it is not what {PACK_FILE} holds" if larger else str(exc))
            continue
        if found != expected:
            result.problems.append(f"{name} was altered: it is not what {PACK_FILE} holds")


def verify_pack(folder: Path, *, head: str | None = None) -> Verification:
    """Verify the pack in `folder` on its own (see the module docstring)."""
    folder = Path(folder)
    result = Verification()
    _strays(folder, result)
    pack = _load(folder, result)
    if pack is None:
        return result
    try:
        sizes = {str(e["record"][6]): int(e["record"][7]) for sync in pack.get("syncs", [])
                 for e in sync.get("entries", [])}
        bodies = _responses(folder, sizes, result)
        entries = _chain(pack, result)
        for sync_id, proven in entries.items():
            for entry in proven:
                if entry.sha256 not in bodies and not any(p.startswith(f"responses/{entry.sha256}")
                                                          for p in result.problems):
                    result.problems.append(f"response {entry.sha256} of sync {sync_id} ({entry.method} "
                                           f"{entry.path}) is missing from responses/")
        _records(pack, entries, bodies, result)
        _listing(pack, result)
        _rendered(folder, pack, result)
    except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
        result.problems.append(f"{PACK_FILE} is not the shape of a pack ({type(exc).__name__}): it was edited")
        return result
    if head is not None and find_head([str(sync.get("seal", {}).get("hash")) for sync in pack.get("syncs", [])],
                                      head) is None:
        result.problems.append(f"the head kept elsewhere ({head.strip()[:64]}) is not in this pack's chain")
    return result
