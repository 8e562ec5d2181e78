"""`diligence evidence --company ID [--as-of TS] --out DIR`: the auditor's pack.

What one counterparty's record was at a date, with the proof. The pack holds

* ``pack.json``: the company's rows as they stood then (its record per namespace, the
  connection and reading rights, its questionnaires with the answers, its documents'
  metadata), each naming the sync and the response it came from; the rows listed by
  key with a count per table, under the pack's seal (the hash of that listing, the
  company, the date and the head); per sealed manifest, from the chain's first kept one
  to its head: its header, outcomes and seal, and for the responses used, their
  manifest entries with a Merkle proof;
* ``responses/<sha256>.json``: the exact bytes the service sent;
* ``index.html``, ``README.md`` and ``records/*.csv``: the same, for a reader who does not
  read JSON (:mod:`.render`).

``diligence verify DIR`` checks a pack on its own, without the warehouse or the service
(:mod:`.pack_verify`): responses hash to their names, entries prove into their
manifest's Merkle root, manifests hash to their seals and link up to the head, parsing
each response again gives its row, and the readable files are what ``pack.json``
renders, and the records are the ones the listing names under the pack's seal. Only
the entries used are in the pack, so it does not show what else the warehouse holds.

``--out`` is a new or empty folder, or an earlier pack of the same company, which is
replaced whole (the new pack is written beside it and moved into its place); never
``/`` or the user's home. Every file is written inside that folder, never through a
link (:mod:`pipelines.evidence.confined`).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from pipelines.company_connections import settings as s
from pipelines.evidence.confined import make_folders, read_file, shown, write_file
from pipelines.evidence.manifest import Manifest
from pipelines.evidence.merkle import canonical, leaves, merkle_proof

from ..errors import EvidenceError
from ..evidence.bucket import pull_everything
from ..evidence.chain import Store, parse_time, read_store
from ..warehouse import Warehouse, table_names
from ..warehouse.filemodes import modes
from .render import render_files
from .verify import ROW_COLUMNS, ROW_KEYS

__all__ = ["PACK_FILE", "PACK_VERSION", "PackResult", "listing_of", "pack_seal", "write_pack"]

PACK_VERSION = 1
PACK_FILE = "pack.json"
#: the history tables a pack shows, in the order it shows them
PACK_TABLES = ("companies", "connections", "questionnaires", "documents")


@dataclass(frozen=True)
class PackResult:
    out: Path
    company_id: str
    as_of: datetime
    records: int
    responses: int
    syncs: int
    head: str


def _iso(value: Any) -> Any:
    return value.astimezone(timezone.utc).isoformat() if isinstance(value, datetime) else value


def _records(owner: Warehouse, company_id: str, as_of: datetime) -> dict[str, list[dict[str, Any]]]:
    """The company's rows of each history table valid at `as_of` (every namespace)."""
    found: dict[str, list[dict[str, Any]]] = {}
    with owner.session(read_only=True, memory_limit=None) as con:
        tables = table_names(con)
        for table in PACK_TABLES:
            if f"raw.{table}" not in tables:
                continue
            columns = [*ROW_COLUMNS[table], "response_sha256", "_dlt_valid_from", "_dlt_valid_to"]
            cursor = con.execute(
                f"select {', '.join(columns)} from raw.{table} where company_id = ? "
                "and _dlt_valid_from <= ? and (_dlt_valid_to is null or _dlt_valid_to > ?) "
                f"order by {', '.join(c for c in ROW_COLUMNS[table] if c.endswith('_id'))}",
                [company_id, as_of, as_of])
            found[table] = [{c: _iso(v) for c, v in zip(columns, values, strict=True)}
                            for values in cursor.fetchall()]
    return found


def _holder(chain: list[tuple[Manifest, set[tuple[str, str | None]]]], sha: str, namespace: str,
            as_of: datetime) -> Manifest | None:
    """The last sealed sync at or before `as_of` that read `sha` in `namespace`."""
    for manifest, read in reversed(chain):
        synced = parse_time(manifest.header.get("synced_at"))
        if synced is not None and synced <= as_of and (sha, namespace) in read:
            return manifest
    return None


def _proofs(manifest: Manifest, shas: set[str], namespace_lists: set[str]) -> list[dict[str, Any]]:
    """The entries of `manifest` for `shas` (and the connection list pages of the
    namespaces in `namespace_lists`), each with its Merkle proof."""
    ordered = canonical(manifest.entries)
    hashes = leaves(ordered)
    chosen = []
    for index, entry in enumerate(ordered):
        is_list = entry.namespace in namespace_lists and entry.path.split("?")[0].endswith(s.CONNECTIONS_PATH)
        if entry.note != "file" and (entry.sha256 in shas or is_list):
            chosen.append({"record": entry.record(), "proof": merkle_proof(hashes, index)})
    return chosen


def _sync_part(manifest: Manifest) -> dict[str, Any]:
    return {"sync_id": manifest.sync_id, "header": manifest.header,
            "outcomes": manifest.outcome_records(),
            "seal": manifest.seal, "entries": []}


def listing_of(records: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """The pack's rows by key (the row's identity and when its version began), with a
    count per table: what the pack's seal covers."""
    listing = {}
    for table in PACK_TABLES:
        keys = sorted([*(str(row.get(c)) for c in ROW_KEYS[table]), str(row.get("_dlt_valid_from"))]
                      for row in records.get(table, []))
        listing[table] = {"count": len(keys), "keys": keys}
    return listing


def pack_seal(pack: dict[str, Any]) -> str:
    """The pack's seal: the hash of its company, date, head and listing."""
    sealed = {"pack": pack.get("pack"), "company_id": pack.get("company_id"), "as_of": pack.get("as_of"),
              "head": pack.get("head"), "listing": pack.get("listing")}
    return hashlib.sha256(orjson.dumps(sealed, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _chain_of(owner: Warehouse) -> tuple[Store, list[Manifest]]:
    strays = pull_everything(owner)
    root = owner.evidence_root
    if root is None or not (root / "syncs").is_dir():
        raise EvidenceError(f"no evidence store at {root or '(evidence is off)'}: a pack needs the responses "
                            "a sync kept")
    store = read_store(root)
    problems = [*strays, *store.problems()]
    if problems:
        raise EvidenceError(f"the evidence chain does not hold ({problems[0]}"
                            f"{f'; {len(problems) - 1} more' if len(problems) > 1 else ''}): "
                            "run `diligence verify` to see what is wrong")
    return store, store.ordered()


def write_pack(owner: Warehouse, company_id: str, out: Path, *, as_of: datetime | None = None) -> PackResult:
    """Write the auditor's pack of `company_id` as it stood at `as_of` (default: now)
    into `out` (see the module docstring). Raises :class:`EvidenceError` for an
    ``--as-of`` before the first sync, a company with no row then, or no evidence."""
    out = _target(out, company_id)
    store, chain = _chain_of(owner)
    syncs = [m for m in chain if m.header.get("kind", "sync") in ("sync", "replay")]
    if not syncs:
        raise EvidenceError("no sealed sync in the evidence store yet: run `diligence sync` first")
    first = parse_time(syncs[0].header.get("synced_at"))
    moment = (as_of or datetime.now(timezone.utc)).astimezone(timezone.utc)
    if first is not None and moment < first:
        raise EvidenceError(f"--as-of {moment.isoformat()} is before the first sync kept as evidence "
                            f"({first.isoformat()}, sync {syncs[0].sync_id}): nothing to show then")
    records = _records(owner, company_id, moment)
    if not any(records.values()):
        raise EvidenceError(f"company {company_id} has no record as of {moment.isoformat()} in "
                            f"{owner.display()} (no company, connection, questionnaire or document row)")
    wanted: dict[str, tuple[set[str], set[str]]] = {}  # sync_id -> (responses, namespaces with lists)
    read = [(m, {(e.sha256, e.namespace) for e in m.entries}) for m in syncs]
    for table, rows in records.items():
        for row in rows:
            sha = row["response_sha256"]
            holder = _holder(read, sha, row["namespace_company_id"], moment) if sha else None
            row["sync_id"] = holder.sync_id if holder else None
            if holder is not None:
                shas, lists = wanted.setdefault(holder.sync_id, (set(), set()))
                shas.add(sha)
                if table == "connections":
                    lists.add(row["namespace_company_id"])
    if not wanted:
        raise EvidenceError(f"the rows of company {company_id} as of {moment.isoformat()} were loaded before "
                            "the warehouse kept evidence: there is nothing to prove them with")
    parts = []
    for manifest in chain:
        part = _sync_part(manifest)
        if manifest.sync_id in wanted:
            part["entries"] = _proofs(manifest, *wanted[manifest.sync_id])
        parts.append(part)
    head = str(parts[-1]["seal"]["hash"])
    pack = {"pack": PACK_VERSION, "company_id": company_id, "as_of": moment.isoformat(),
            "created_at": datetime.now(timezone.utc).isoformat(), "warehouse": owner.display(),
            "head": head, "records": records, "listing": listing_of(records), "syncs": parts}
    pack["seal"] = pack_seal(pack)
    sizes = {e["record"][6]: e["record"][7] for p in parts for e in p["entries"]}
    files = {("responses", f"{sha}.json"): store.responses.get(sha, size) for sha, size in sorted(sizes.items())}
    files[(PACK_FILE,)] = (orjson.dumps(pack, option=orjson.OPT_INDENT_2).decode() + "\n").encode()
    for name, text in render_files(pack).items():
        files[Path(name).parts] = text.encode()
    _write_folder(out, files)
    return PackResult(out, company_id, moment, sum(len(r) for r in records.values()), len(sizes),
                      len(parts), head)


def _target(out: Path, company_id: str) -> Path:
    """The folder a pack of `company_id` may be written to: `out` resolved, if it is new,
    empty, or an earlier pack of the same company (replaced whole); never ``/`` or the
    user's home (:class:`EvidenceError` otherwise)."""
    target = Path(out).expanduser().resolve()
    if target == Path(target.anchor) or target == Path.home().resolve():
        raise EvidenceError(f"--out {out}: a pack is never written into {target}; name a new folder for it")
    if target.exists() and not target.is_dir():
        raise EvidenceError(f"--out {out} is a file, not a folder; name a new folder for the pack")
    if target.is_dir() and any(target.iterdir()):
        try:
            earlier = orjson.loads(read_file(target, (PACK_FILE,), 1 << 30))
        except (OSError, orjson.JSONDecodeError):
            earlier = None
        if not isinstance(earlier, dict) or earlier.get("company_id") != company_id:
            raise EvidenceError(f"--out {out} is not empty and holds no pack of company {shown(company_id)}: "
                                "name a new or empty folder (an earlier pack of the same company is replaced)")
    return target


def _write_folder(out: Path, files: dict[tuple[str, ...], bytes]) -> None:
    """Write `files` into a new folder beside `out`, then put it in `out`'s place (an
    earlier pack there is replaced whole, never merged)."""
    chosen = modes()
    make_folders(out.parent, chosen.folder)
    token = f"{os.getpid()}-{secrets.token_hex(4)}"
    if out.is_dir() and not any(out.iterdir()):  # an empty folder the user made: written in place
        for parts, data in files.items():
            write_file(out, parts, data, mode=chosen.file, folder_mode=chosen.folder)
        return
    building = out.with_name(f".{out.name}.new-{token}")
    os.mkdir(building, chosen.folder)
    try:
        os.chmod(building, chosen.folder)
        for parts, data in files.items():
            write_file(building, parts, data, mode=chosen.file, folder_mode=chosen.folder)
        if out.is_dir() and not out.is_symlink():
            earlier = out.with_name(f".{out.name}.old-{token}")
            os.rename(out, earlier)
            os.rename(building, out)
            shutil.rmtree(earlier, ignore_errors=True)
        else:
            os.rename(building, out)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
