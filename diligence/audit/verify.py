"""`diligence verify`: the warehouse's raw rows are what the service said, unchanged.

For a warehouse and its evidence store, :func:`verify_warehouse` checks that

1. the chain of sealed manifests holds (:meth:`~.chain.Store.problems`): each hashes to
   its seal, links to the one before, and ``HEAD`` names the last;
2. every response kept hashes to its name, and every response a sealed manifest names
   is kept (a pruned sync's are not asked for);
3. every raw row of service data names (``response_sha256``) a response of a sealed
   manifest, and parsing that response again gives the row, column by column
   (:func:`pipelines.company_connections.rows.rows_of_response`; a connection also
   needs its namespace's list of connections, from the same manifest); every
   downloaded file's SHA-256 is in a sealed manifest of document downloads;
4. with `head`, a head kept elsewhere (a Prefect artifact, a notification) is a hash of
   the chain.

What it cannot prove: someone who can write both the store and the warehouse can
rewrite both consistently, chain included, unless a head kept elsewhere is given.
Rows loaded before the warehouse kept evidence (no ``response_sha256``), rows of pruned
syncs and rows whose sync has not sealed its manifest yet are counted, not checked.

A verification that passes keeps a checkpoint (:mod:`.checkpoint`); the next one extends
from it: the manifests, responses and rows since its seal are checked as above, the older
row versions are counted against it and a sample of them (:data:`SAMPLE`) is checked
against its responses. ``full`` takes nothing on trust; `since` (a seal, or a sync id)
starts from a seal the caller verified before.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pipelines.company_connections import settings as s
from pipelines.company_connections.rows import rows_of_response
from pipelines.evidence.confined import is_sync_id
from pipelines.evidence.manifest import SEALED_SUFFIX, Manifest, read_manifest
from pipelines.evidence.sealing import chain_links
from pipelines.evidence.store import MAX_BODY, StoredResponse

from ..errors import EvidenceError
from ..evidence.accounting import recount
from ..evidence.bucket import pull_everything
from ..evidence.chain import Store, parse_time, read_store, sealed_after
from ..evidence.checkpoint import CHECKPOINT, Checkpoint, read_checkpoint, write_checkpoint
from ..warehouse import Warehouse, table_names
from ..words import counted

__all__ = ["MAX_LINES", "ROW_KEYS", "SAMPLE", "Verification", "check_rows", "find_head", "verify_warehouse"]

#: problems printed one per line; the rest are counted
MAX_LINES = 20
#: older rows (before a checkpoint) checked against their responses by each verify that
#: extends from it, per table
SAMPLE = 40
#: the manifests a sample may read to check its rows (the rest of the sample is skipped)
SAMPLE_SYNCS = 20

#: raw table -> the columns that identify a row (its version: valid from)
ROW_KEYS: dict[str, tuple[str, ...]] = {
    "user_roles": ("namespace_company_id",),
    "companies": ("namespace_company_id", "company_id"),
    "connections": ("namespace_company_id", "company_id"),
    "questionnaires": ("namespace_company_id", "company_id", "company_type_id"),
    "documents": ("namespace_company_id", "company_id", "company_type_id", "document_id"),
    "questionnaire_templates": ("namespace_company_id", "company_type_id"),
}
#: the columns parsing gives (compared), per table
ROW_COLUMNS: dict[str, tuple[str, ...]] = {
    "user_roles": ("namespace_company_id", "internal_names", "internal_company_type_ids",
                   "external_names", "external_company_type_ids"),
    "companies": ("namespace_company_id", "company_id", "name", "country", "city", "lei", "cin",
                  "is_namespace_company", "content_hash"),
    "connections": ("namespace_company_id", "company_id", "name", "country", "given_company_type_ids",
                    "received_company_type_ids", "has_detail", "content_hash"),
    "questionnaires": ("namespace_company_id", "company_id", "company_type_id", "forms_json", "content_hash"),
    "documents": ("namespace_company_id", "company_id", "company_type_id", "document_id", "name",
                  "category", "type", "issue_date", "expiration_date", "document_json", "content_hash"),
    "questionnaire_templates": ("namespace_company_id", "company_type_id", "forms_json", "content_hash"),
}
_HISTORY = ("companies", "connections", "questionnaire_templates", "questionnaires", "documents")


@dataclass
class Verification:
    """What verify found: counts, the head, and each problem as one line."""

    syncs: int = 0
    responses: int = 0
    rows: int = 0
    head: str | None = None
    problems: list[str] = field(default_factory=list)
    #: rows counted, not checked: loaded before evidence was kept, of pruned syncs,
    #: of a sync whose manifest is not sealed yet
    before_evidence: int = 0
    pruned: int = 0
    awaiting_seal: int = 0
    #: the checkpoint this verification extended from (None: it checked everything),
    #: the older row versions it counted against it, and how many of them it sampled
    since: Checkpoint | None = None
    older: int = 0
    sampled: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def line(self) -> str:
        """The one line of a verification that passed."""
        extra = "".join(f"; {counted(count, 'row')} {what}" for count, what in (
            (self.before_evidence, "older than the evidence (not checked)"),
            (self.pruned, "of pruned syncs (not checked)"),
            (self.awaiting_seal, "of a sync not sealed yet (not checked)")) if count)
        since = ""
        if self.since is not None and self.since.rows is None:
            since = (f"; since the seal {self.since.seal[:12]} given by --since: {counted(self.sampled, 'older row')} "
                     "sampled (--full checks all)")
        elif self.since is not None:
            since = (f"; since the seal {self.since.seal[:12]} verified {self.since.verified_at[:10]}: "
                     f"{counted(self.older, 'older row version')} counted, {self.sampled:,} sampled (--full checks all)")
        return (f"verified {counted(self.syncs, 'sync')}, {counted(self.responses, 'response')}, "
                f"{counted(self.rows, 'row')}; head {self.head or 'none'}{extra}{since}")

    def lines(self, limit: int = MAX_LINES) -> list[str]:
        """The problems, one line each, at most `limit`, then how many more."""
        shown = self.problems[:limit]
        if len(self.problems) > limit:
            shown.append(f"... and {len(self.problems) - limit} more problems")
        return shown


def find_head(store: Store | Iterable[str], head: str) -> str | None:
    """The hash of the chain that `head` (a kept head: the hash, or a prefix of at
    least 8 hex digits) names; None when none does."""
    hashes = list(store.by_hash) if isinstance(store, Store) else list(store)
    wanted = head.strip().lower()
    if len(wanted) < 8:
        return None
    found = [h for h in hashes if h.startswith(wanted)]
    return found[0] if len(found) == 1 else None


def _sizes(store: Store) -> dict[str, int]:
    """The size each sealed manifest records for a response (the largest, if several
    disagree: the hash then decides)."""
    sizes: dict[str, int] = {}
    for manifest in [*store.sealed, *store.unsealed]:
        for entry in manifest.entries:
            if entry.note != "file" and entry.size > sizes.get(entry.sha256, -1):
                sizes[entry.sha256] = entry.size
    return sizes


def _check_responses(store: Store, result: Verification, *, every: bool = True) -> tuple[set[str], set[str]]:
    """Every kept response hashes to its name (read back and hashed as it decompresses,
    never past the size its manifest records); every one a sealed manifest names is
    kept (not `every`: only those the manifests read name, the others are taken as
    verified). Returns (good, bad) hashes: kept intact, and altered or missing."""
    good: set[str] = set()
    bad: set[str] = set()
    sizes = _sizes(store)
    if every:
        files, strays = store.responses.scan()
        result.problems.extend(strays)
    else:
        files = [StoredResponse(sha, store.responses.path(sha)) for sha in sorted(sizes)
                 if os.path.lexists(store.responses.path(sha))]
    for stored in files:
        try:
            actual, _size = store.responses.digest(stored.sha256, sizes.get(stored.sha256, MAX_BODY))
        except OSError as exc:
            result.problems.append(f"response {stored.sha256} is damaged: {exc}")
            bad.add(stored.sha256)
            continue
        if actual != stored.sha256:
            result.problems.append(f"response {stored.sha256} was altered: its bytes hash to {actual}")
            bad.add(stored.sha256)
        else:
            good.add(stored.sha256)
    result.responses = len(good)
    for manifest in store.sealed:
        for entry in manifest.entries:
            if entry.note != "file" and entry.sha256 not in good and entry.sha256 not in bad:
                result.problems.append(f"response {entry.sha256} of sync {manifest.sync_id} "
                                       f"({entry.method} {entry.path}) is missing")
                bad.add(entry.sha256)
    return good, bad


@dataclass
class _Index:
    """Which sealed manifest holds each response, per namespace, and each manifest's
    connection list pages."""

    holder: dict[tuple[str, str | None], Manifest] = field(default_factory=dict)
    lists: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    files: set[str] = field(default_factory=set)
    unsealed: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, store: Store) -> _Index:
        index = cls()
        for manifest in store.sealed:
            pages: dict[str, list[tuple[str, str]]] = {}
            for entry in manifest.entries:
                if entry.note == "file":
                    index.files.add(entry.sha256)
                    continue
                index.holder[(entry.sha256, entry.namespace)] = manifest
                if entry.namespace is not None and entry.path.split("?")[0].endswith(s.CONNECTIONS_PATH):
                    pages.setdefault(entry.namespace, []).append((entry.fetched_at, entry.sha256))
            for namespace, found in pages.items():
                index.lists[(manifest.sync_id, namespace)] = [sha for _at, sha in sorted(found)]
        for manifest in store.unsealed:
            index.unsealed.update(e.sha256 for e in manifest.entries)
        return index


def _describe(table: str, row: dict[str, Any]) -> str:
    key = " ".join(f"{column.removesuffix('_company_id').removesuffix('_id')} {row[column]}"
                   for column in ROW_KEYS[table])
    since = row.get("_dlt_valid_from") or row.get("synced_at")
    return f"raw.{table} {key}" + (f" (version from {_iso(since)})" if since else "")


def _iso(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime) else str(value)


def check_rows(table: str, rows: Iterable[dict[str, Any]], body_of: Any, lists_of: Any,
               problems: list[str]) -> int:
    """Parse each row's response again (`body_of(sha)`: its bytes; `lists_of(sha,
    namespace)`: the bytes of the namespace's connection list pages) and compare it
    with the row, column by column; a difference is a problem line. Returns the rows
    checked."""
    checked = 0
    parsed: dict[tuple[str, str, str | None], list[dict[str, Any]]] = {}
    for row in rows:
        sha = row["response_sha256"]
        key = {k: row.get(k) for k in (*ROW_KEYS[table], "is_namespace_company", "has_detail")}
        cache = (sha, str(row["namespace_company_id"]), row.get("company_id") if table != "documents" else
                 f"{row.get('company_id')}\x00{row.get('company_type_id')}")
        try:
            if table in ("companies", "connections") or cache not in parsed:
                lists = lists_of(sha, row["namespace_company_id"]) if table == "connections" else ()
                parsed[cache] = rows_of_response(table, body_of(sha), key, connection_list=lists)
            expected = parsed[cache]
        except Exception as exc:  # noqa: BLE001 - any parser error is a finding
            problems.append(f"{_describe(table, row)}: its response {sha[:12]} does not parse again: "
                            f"{type(exc).__name__}")
            checked += 1
            continue
        match = next((r for r in expected if all(r.get(k) == row.get(k) for k in ROW_KEYS[table])), None)
        if match is None:
            problems.append(f"{_describe(table, row)}: its response {sha[:12]} has no such row")
        else:
            differ = [c for c in ROW_COLUMNS[table] if c in row and match.get(c) != row[c]]
            if differ:
                verb = "differs" if len(differ) == 1 else "differ"
                problems.append(f"{_describe(table, row)} was edited: {', '.join(differ)} {verb} "
                                f"from its response {sha[:12]}")
        checked += 1
    return checked


def _version_column(con: Any, table: str) -> tuple[str, set[str]]:
    """The column that says when a row version of `table` began, and the columns there
    are (a table of an older release's shape, not versioned yet, is read as it is)."""
    present = {row[0] for row in con.execute(
        "select column_name from information_schema.columns where table_catalog = current_database() "
        "and table_schema = 'raw' and table_name = ?", [table]).fetchall()}
    return ("_dlt_valid_from" if table in _HISTORY and "_dlt_valid_from" in present else "synced_at"), present


def _raw_rows(con: Any, table: str, after: datetime | None = None, sample: int | None = None,
              late: Iterable[datetime] = ()) -> Iterator[dict[str, Any]]:
    """The rows of raw.`table` (`after`: those whose version began after it, or at one
    of the times `late`; `sample`: that many of the others, picked at random)."""
    since, present = _version_column(con, table)
    columns = sorted({*ROW_COLUMNS[table], *ROW_KEYS[table], "response_sha256", since} & present)
    where, parameters = ("", {}) if after is None else _split(since, after, late, older=bool(sample))
    picked = f"using sample reservoir({int(sample)} rows)" if sample else ""
    cursor = con.execute(f"select {', '.join(columns)} from (select * from raw.{table} {where}) {picked} "
                         f"order by {', '.join(ROW_KEYS[table])}", parameters)
    while batch := cursor.fetchmany(2048):
        for values in batch:
            yield dict(zip(columns, values, strict=True))


def _split(since: str, moment: datetime, late: Iterable[datetime], *, older: bool) -> tuple[str, dict[str, Any]]:
    """The condition (and its parameters) of the row versions a checkpoint at `moment`
    covers (`older`), or of the others: those after it, and those of the syncs `late`
    (begun by then, sealed after the checkpoint's seal)."""
    parameters: dict[str, Any] = {"moment": moment}
    names = []
    for number, when in enumerate(sorted(set(late))):
        parameters[f"late{number}"] = when
        names.append(f"$late{number}")
    listed = f"{since} in ({', '.join(names)})" if names else "false"
    if older:
        return f"where {since} <= $moment and not ({listed})", parameters
    return f"where {since} > $moment or {listed}", parameters


def _sync_time(sync_id: str) -> datetime | None:
    """The time a sync began, which its id spells and its row versions carry."""
    try:
        return datetime.strptime(sync_id, "%Y%m%dT%H%M%S%fZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def _late(store: Store, start: Checkpoint | None) -> list[datetime]:
    """The syncs of `store` (read after `start`'s seal) that began at or before the time
    `start` covers: syncs that ran beside the ones it covers and sealed after them."""
    if start is None:
        return []
    return [t for m in [*store.sealed, *store.unsealed] if (m.seal or {}).get("hash") != start.seal
            and (t := _sync_time(m.sync_id)) is not None and t <= start.time]


def _starting_point(root: Path, full: bool, since: str | None, problems: list[str]) -> Checkpoint | None:
    """The checkpoint a verification extends from: `since` (a seal or sync id the caller
    verified before), else the store's (:mod:`.checkpoint`); None: check everything. A
    checkpoint that cannot be used is one line of `problems` (everything is checked)."""
    if full:
        return None
    found: Checkpoint | str | None
    if since is not None:
        links = chain_links(root / "syncs").links
        wanted = since.strip().lower()
        matches = [k for k in links if k.sync_id == since.strip() or (len(wanted) >= 8 and k.hash.startswith(wanted))]
        if len(matches) != 1:
            raise EvidenceError(f"--since {since}: no seal or sync of the chain is named so (give a seal's hash, "
                                "8 hex digits or more, or a sync id)")
        order = sorted(links, key=lambda k: (k.sealed_at, k.sync_id))
        covered = [t for k in order[:order.index(matches[0]) + 1] if (t := _sync_time(k.sync_id)) is not None]
        found = Checkpoint(matches[0].hash, matches[0].sync_id, max(covered).isoformat(), "")
    else:
        found = read_checkpoint(root)
    if isinstance(found, str):
        problems.append(found)
        return None
    if found is not None and sealed_after(root, found.seal) is None:
        problems.append(f"the verified checkpoint names the seal {found.seal[:12]} (sync {found.sync_id}), which is "
                        "not in the chain before its last seal: everything was checked")
        return None
    return found


def verify_warehouse(owner: Warehouse, *, head: str | None = None, full: bool = False,
                     since: str | None = None) -> Verification:
    """Verify `owner` against its evidence store (see the module docstring); a store in
    a bucket is copied in first. It extends from the store's verified checkpoint unless
    `full`; `since` names a seal to extend from instead. A verification that passes
    keeps its checkpoint."""
    strays = pull_everything(owner)
    root = owner.evidence_root
    if root is None or not (root / "syncs").is_dir():
        where = root if root is not None else "(evidence is off: [evidence] enabled = false)"
        raise EvidenceError(f"no evidence store at {where}: nothing to verify; a sync keeps its evidence "
                            "there (or pass --evidence)")
    notes: list[str] = []
    start = _starting_point(root, full, since, notes)
    store = read_store(root, after=start.seal if start is not None else None)
    result = Verification(syncs=len(store.syncs()) - (start is not None), head=store.head[0] if store.head else None,
                          since=start)
    result.problems.extend([*strays, *notes, *store.problems()])
    _recorded(store, start, result.problems)
    good, bad = _check_responses(store, result, every=start is None)
    index = _Index.of(store)
    late = _late(store, start)
    if owner.exists():
        with owner.session(read_only=True, memory_limit=None) as con:
            _check_warehouse(con, store, index, good, bad, result, late)
            if start is not None:
                _check_older(con, root, start, result, late)
            last = store.by_hash.get(result.head or "")
            if result.ok and last is not None and (since is None or full):
                write_checkpoint(root, _checkpoint_of(con, last, store, start))
    if head is not None and find_head(read_store(root, entries=False) if start is not None else store, head) is None:
        result.problems.append(f"the head kept elsewhere ({head.strip()[:64]}) is not in the chain: "
                               "the chain was rewritten, or its manifests removed")
    return result


def _recorded(store: Store, start: Checkpoint | None, problems: list[str]) -> None:
    """A checkpoint the chain recorded (a sync's header, sealed) for the seal `start`
    names must be `start`: otherwise its file was edited."""
    if start is None or start.rows is None:
        return
    for manifest in store.sealed:
        recorded = manifest.header.get("verified")
        if isinstance(recorded, dict) and recorded.get("seal") == start.seal and recorded.get("digest") != start.digest:
            problems.append(f"syncs/{CHECKPOINT} is not the checkpoint sync {manifest.sync_id} sealed for the seal "
                            f"{start.seal[:12]}: it was edited since")


def _checkpoint_of(con: Any, last: Manifest, store: Store, start: Checkpoint | None) -> Checkpoint:
    """The checkpoint of a verification that passed at the sealed manifest `last` (the
    head of `store`, read after `start`'s seal): it covers the syncs sealed by then, up
    to the latest time one of them began (syncs of other workers seal in any order); the
    rows of a sync begun by then and not sealed yet are not counted."""
    times = [t for m in store.sealed if (t := _sync_time(m.sync_id)) is not None]
    moment = max([*times, *([start.time] if start is not None else [])])
    pending = [t for m in store.unsealed if (t := _sync_time(m.sync_id)) is not None and t <= moment]
    rows = {table: _older(con, table, moment, pending) for table in _HISTORY if f"raw.{table}" in table_names(con)}
    return Checkpoint(str((last.seal or {})["hash"]), last.sync_id, moment.isoformat(),
                      datetime.now(timezone.utc).isoformat(), rows)


def _older(con: Any, table: str, moment: datetime, late: Iterable[datetime] = ()) -> int:
    since, _present = _version_column(con, table)
    where, parameters = _split(since, moment, late, older=True)
    return int(con.execute(f"select count(*) from raw.{table} {where}", parameters).fetchone()[0])


def _check_older(con: Any, root: Path, start: Checkpoint, result: Verification, late: list[datetime]) -> None:
    """The rows before the checkpoint: their versions counted again per table (a deleted
    or added one changes a count), and a sample checked against their responses."""
    moment = start.time
    tables = table_names(con)
    for table, expected in sorted((start.rows or {}).items()):
        if f"raw.{table}" not in tables:
            continue
        found = _older(con, table, moment, late)
        result.older += found
        if found != expected:
            difference = f"{expected - found:,} deleted" if found < expected else f"{found - expected:,} added"
            result.problems.append(f"raw.{table}: {found:,} row versions are at or before the verified seal "
                                   f"{start.seal[:12]}, {expected:,} were when it was verified ({difference})")
    picked: dict[str, list[dict[str, Any]]] = {}
    syncs: dict[str, Manifest | None] = {}
    for table in ROW_KEYS:
        for row in _raw_rows(con, table, moment, sample=SAMPLE, late=late) if f"raw.{table}" in tables else ():
            when = _version_time(row)
            sync_id = when.strftime("%Y%m%dT%H%M%S%fZ") if when is not None else ""
            if row["response_sha256"] is None or not is_sync_id(sync_id):
                continue
            if sync_id not in syncs and len(syncs) < SAMPLE_SYNCS:  # the sync that read it: its id is its time
                syncs[sync_id] = read_manifest(root / "syncs" / f"{sync_id}{SEALED_SUFFIX}")
            if syncs.get(sync_id) is not None:
                picked.setdefault(table, []).append(row)
    sample = Store(root, sealed=[m for m in syncs.values() if m is not None])
    good, _bad = _check_responses(sample, Verification(problems=result.problems), every=False)
    index, sizes = _Index.of(sample), _sizes(sample)

    def body_of(sha: str) -> bytes:
        return sample.responses.get(sha, sizes.get(sha, MAX_BODY))

    def lists_of(sha: str, namespace: str) -> list[bytes]:
        manifest = index.holder.get((sha, namespace))
        pages = index.lists.get((manifest.sync_id, namespace), []) if manifest else []
        return [body_of(page) for page in pages if page in good]

    for table, rows in picked.items():
        held = [row for row in rows if row["response_sha256"] in good and (
            (row["response_sha256"], row["namespace_company_id"]) in index.holder or table == "user_roles")]
        result.sampled += check_rows(table, held, body_of, lists_of, result.problems)


def _check_warehouse(con: Any, store: Store, index: _Index, good: set[str], bad: set[str],
                     result: Verification, late: list[datetime]) -> None:
    tables = table_names(con)
    after = result.since.time if result.since is not None else None
    first = after or store.began
    sizes = _sizes(store)

    def body_of(sha: str) -> bytes:
        return store.responses.get(sha, sizes.get(sha, MAX_BODY))

    def lists_of(sha: str, namespace: str) -> list[bytes]:
        manifest = index.holder.get((sha, namespace))
        pages = index.lists.get((manifest.sync_id, namespace), []) if manifest else []
        return [body_of(page) for page in pages if page in good]

    for table in ROW_KEYS:
        if f"raw.{table}" not in tables:
            continue
        checkable = []
        for row in _raw_rows(con, table, after, late=late):
            sha = row["response_sha256"]
            since = _version_time(row)
            if sha is None and first is not None and (since is None or since >= first or since in late):
                result.problems.append(f"{_describe(table, row)} names no response (response_sha256 is NULL), "
                                       f"though it is not older than the evidence ({_iso(first)})")
            elif sha is None:
                result.before_evidence += 1
            elif (sha, row["namespace_company_id"]) in index.holder or (
                    table == "user_roles" and (sha, None) in index.holder):
                if sha in good:
                    checkable.append(row)
                elif sha not in bad:  # pragma: no cover - a sealed entry is good or bad
                    result.problems.append(f"{_describe(table, row)}: its response {sha[:12]} is not kept")
            elif sha in index.unsealed:
                result.awaiting_seal += 1
            elif store.pruned_before is not None and since is not None and since < store.pruned_before:
                result.pruned += 1
            else:
                result.problems.append(f"{_describe(table, row)}: its response {sha[:12]} is in no sealed "
                                       "manifest")
        result.rows += check_rows(table, checkable, body_of, lists_of, result.problems)
    recount(con, [m for m in store.ordered() if m.header.get("kind", "sync") in ("sync", "replay")],
            result.problems)
    if "raw.document_files" in tables:
        for ns, doc, sha, downloaded in con.execute(
                "select namespace_company_id, document_id, sha256, downloaded_at from raw.document_files "
                "order by 1, 2").fetchall():
            at = parse_time(_iso(downloaded)) if downloaded else None
            if sha in index.files:
                result.rows += 1
            elif first is None or (at is not None and at < first):
                result.before_evidence += 1
            else:
                result.problems.append(f"raw.document_files namespace {ns} document {doc}: its file "
                                       f"{str(sha)[:12]} is in no sealed manifest")


def _version_time(row: dict[str, Any]) -> datetime | None:
    value = row.get("_dlt_valid_from") or row.get("synced_at")
    return parse_time(_iso(value)) if value is not None else None
