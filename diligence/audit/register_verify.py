"""`diligence verify DIR -w WAREHOUSE`: an export of the register as of a date checked
against the warehouse's evidence store.

An export made with ``--as-of`` (``diligence export --as-of``, the register flow) carries
``register.json``: the moment, the sync it stands on, the evidence head when it was
written and each file's SHA-256 (:func:`diligence.report.export.write_register_manifest`).
Checked, each failure one line:

1. each file it names hashes to its recorded SHA-256, and the folder holds no report
   file it does not name (``report.html`` is not part of the proof);
2. the store's chain is whole (verify's checks of its manifests and seals), and the head
   the export names is one of its seals (with ``--head``, so is the head kept elsewhere);
3. every ``response_sha256`` and ``company_response_sha256`` of every row is a response
   that a sealed manifest at or before that head names, of a sync that began at or before
   the register's moment, and the store keeps it. A row that names none was loaded
   before evidence was kept: counted apart.

That the kept responses hash to their names and that parsing them gives the warehouse's
rows is what ``diligence verify -w WAREHOUSE`` checks; run it too. The folder is read as
someone else wrote it: no file through a link or past a bounded size, and a
``register.json`` not of its shape is one line.
"""

from __future__ import annotations

import csv
import hashlib
import io
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pyarrow
import pyarrow.parquet

from pipelines.evidence.confined import is_sha256, listing, read_file, shown
from pipelines.evidence.store import MAX_TABLE

from ..errors import EvidenceError
from ..evidence.chain import Store, parse_time, read_store
from ..report.export import REGISTER_FILE, REGISTER_VERSION, REPORTS, Format
from .verify import Verification, find_head

__all__ = ["is_register", "verify_register"]

#: the largest export file read (each is read whole to hash and parse it)
MAX_EXPORT_FILE = 1 << 30
#: the columns that name a row's response
SHA_COLUMNS = ("response_sha256", "company_response_sha256")
_REPORT_FILES = frozenset(f"{report}.{fmt}" for report in REPORTS for fmt in Format)


def is_register(path: Path) -> bool:
    return (Path(path) / REGISTER_FILE).is_file()


def verify_register(folder: Path, store_root: Path | None, *, head: str | None = None) -> Verification:
    """Verify the register export in `folder` against the evidence store at `store_root`
    (see the module docstring)."""
    folder = Path(folder)
    if store_root is None or not (store_root / "syncs").is_dir():
        raise EvidenceError(f"no evidence store at {store_root or '(evidence is off)'}: a register export is "
                            "checked against the store of the warehouse it came from (--warehouse or --evidence)")
    result = Verification()
    register = _load(folder, result)
    if register is None:
        return result
    bodies = _files(folder, register, result)
    store = read_store(store_root)
    result.problems.extend(store.problems())
    result.syncs = len(store.syncs())
    named = find_head(store, register["evidence_head"]) if register["evidence_head"] else None
    result.head = named
    if named is None:
        result.problems.append(f"the evidence head {shown(register['evidence_head'])} that {REGISTER_FILE} "
                               "names is not a seal of the store's chain")
        return result
    if head is not None and find_head(store, head) is None:
        result.problems.append(f"the head kept elsewhere ({head.strip()[:64]}) is not in the store's chain")
    allowed = _responses_up_to(store, named, register["as_of"])
    responses = store.responses
    seen: set[str] = set()
    for name, body in sorted(bodies.items()):
        for line, sha in _shas(name, body, result):
            result.rows += 1
            if sha is None:
                result.before_evidence += 1
            elif sha not in allowed:
                result.problems.append(f"{name} row {line}: response {shown(sha)} is not one a sync up to "
                                       f"{register['as_of'].isoformat()} read (by the chain up to its head)")
            elif sha not in seen and not responses.has(sha):
                result.problems.append(f"{name} row {line}: response {sha} is missing from the store")
            if sha is not None:
                seen.add(sha)
    result.responses = len(seen)
    return result


def register_line(result: Verification, folder: Path) -> str:
    """The one line of a register export that verified."""
    older = f"; {result.before_evidence:,} older than the evidence (not checked)" if result.before_evidence else ""
    return (f"verified the register {folder}: {result.rows:,} rows name {result.responses:,} responses of the "
            f"store's chain (head {result.head}){older}")


def _load(folder: Path, result: Verification) -> dict[str, Any] | None:
    try:
        register = orjson.loads(read_file(folder, (REGISTER_FILE,), MAX_TABLE))
    except FileNotFoundError:
        raise EvidenceError(f"{folder} is not a register export: it has no {REGISTER_FILE}") from None
    except (OSError, orjson.JSONDecodeError) as exc:
        result.problems.append(f"{REGISTER_FILE} cannot be read: {exc}")
        return None
    files = register.get("files") if isinstance(register, dict) else None
    moment = parse_time(register.get("as_of")) if isinstance(register, dict) else None
    if (not isinstance(files, dict) or register.get("register") != REGISTER_VERSION or moment is None
            or not all(name in _REPORT_FILES and isinstance(f, dict) and is_sha256(f.get("sha256"))
                       for name, f in files.items())
            or not (register.get("evidence_head") is None or isinstance(register.get("evidence_head"), str))):
        result.problems.append(f"{REGISTER_FILE} is not the shape of a register export: it was edited")
        return None
    return {**register, "as_of": moment}


def _files(folder: Path, register: dict[str, Any], result: Verification) -> dict[str, bytes]:
    """Each named file's bytes, when it hashes to its record; a problem for each that does
    not, is missing, or is a report file not named."""
    bodies = {}
    for name, recorded in sorted(register["files"].items()):
        try:
            body = read_file(folder, (name,), MAX_EXPORT_FILE)
        except FileNotFoundError:
            result.problems.append(f"{name} is missing from the register export")
            continue
        except OSError as exc:
            result.problems.append(f"{name}: {exc}")
            continue
        if hashlib.sha256(body).hexdigest() != recorded["sha256"]:
            result.problems.append(f"{name} does not hash to the SHA-256 {REGISTER_FILE} records: it was edited")
            continue
        bodies[name] = body
    for name, _kind in listing(folder):
        if name in _REPORT_FILES and name not in register["files"]:
            result.problems.append(f"{name} is not named by {REGISTER_FILE}: it was added")
    return bodies


def _responses_up_to(store: Store, head: str, moment: datetime) -> set[str]:
    """The responses named by the sealed manifests of the chain from `head` back, of the
    syncs that began at or before `moment`."""
    by_hash = store.by_hash
    allowed: set[str] = set()
    current = by_hash.get(head)
    while current is not None:
        began = parse_time(current.header.get("synced_at") or current.header.get("started_at"))
        if began is not None and began <= moment:
            allowed.update(entry.sha256 for entry in current.load_entries().entries)
        current = by_hash.get(str((current.seal or {}).get("previous")))
    return allowed


def _shas(name: str, body: bytes, result: Verification) -> list[tuple[int, str | None]]:
    """(row number, the response it names or None) for each row and response column of
    the export file `name`; a file that cannot be parsed is one problem."""
    found: list[tuple[int, str | None]] = []
    try:
        if name.endswith(".csv"):
            rows = csv.reader(io.StringIO(body.decode("utf-8")))
            header = next(rows, [])
            columns = [header.index(c) for c in SHA_COLUMNS if c in header]
            for number, row in enumerate(rows, start=1):
                found.extend((number, row[i] or None) for i in columns)
        else:
            table = pyarrow.parquet.read_table(pyarrow.BufferReader(body))
            columns = [table.column_names.index(c) for c in SHA_COLUMNS if c in table.column_names]
            for index in columns:
                found.extend(enumerate(table.column(index).to_pylist(), start=1))
    except (UnicodeDecodeError, csv.Error, pyarrow.ArrowException, IndexError) as exc:
        result.problems.append(f"{name} cannot be read as its format: {type(exc).__name__}")
        return []
    if not columns:
        result.problems.append(f"{name} has no response_sha256 column: its rows name no response")
    return found
