"""Every raw row accounted for: what each commit wrote is counted, sealed, and counted again.

A row can be checked against the response it names, but a row that is gone names
nothing. So when a namespace's load commits, the sync counts the raw row versions that
commit inserted and retired, per table (:func:`count_commit`); the counts go into the
namespace's outcome record, which the manifest's seal covers. ``diligence verify`` counts
the same again in the warehouse (:func:`recount`): a deleted version, or one inserted by
hand, or a validity edited, makes a count differ, and the line says which sync, table and
namespace.

A history table's version inserted by the sync at ``synced_at`` S has ``_dlt_valid_from``
S, and one it retired has ``_dlt_valid_to`` S (S is every load's scd2 boundary, see
:mod:`pipelines.company_connections.source`). ``user_roles`` is replaced per namespace, so
only the last sync that read the namespace still has its rows there; when that sync did
not record its commit (killed between the commit and its outcome record, which the next
sync learns from ``raw.sync_runs``), they are not counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from pipelines.company_connections.schema import CURRENT_STATE, HISTORY
from pipelines.evidence.manifest import Manifest, RowCounts

from ..warehouse import table_names

__all__ = ["COUNTED", "count_commit", "recount"]

#: the tables whose rows a commit counts
COUNTED: tuple[str, ...] = (*CURRENT_STATE, *HISTORY)


def _utc(value: Any) -> str | None:
    if not isinstance(value, datetime):
        return None
    return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).astimezone(timezone.utc).isoformat()


def count_commit(con: Any, namespace: str, synced_at: datetime) -> RowCounts:
    """The row versions of `namespace` that the commit of the sync at `synced_at` left in
    `raw`: per table, [inserted, retired] (for ``user_roles``: [rows, 0])."""
    tables = table_names(con)
    counts: RowCounts = {}
    for table in COUNTED:
        if f"raw.{table}" not in tables:
            continue
        if table in CURRENT_STATE:
            sql = (f"select count(*) filter (where synced_at = $at), 0 from raw.{table} "
                   "where namespace_company_id = $ns")
        else:
            sql = (f"select count(*) filter (where _dlt_valid_from = $at), "
                   f"count(*) filter (where _dlt_valid_to = $at) from raw.{table} where namespace_company_id = $ns")
        inserted, retired = con.execute(sql, {"at": synced_at, "ns": namespace}).fetchone()
        counts[table] = [int(inserted), int(retired)]
    return counts


def _found(con: Any, table: str, column: str) -> dict[tuple[str, str], int]:
    """(namespace, time in UTC) -> rows of raw.`table` with that `column`."""
    return {(str(ns), at): int(n) for ns, value, n in con.execute(
        f"select namespace_company_id, {column}, count(*) from raw.{table} where {column} is not null group by all"
    ).fetchall() if (at := _utc(value)) is not None}


def recount(con: Any, syncs: Iterable[Manifest], problems: list[str]) -> int:
    """Count again in `raw` what each of the sealed `syncs` (in chain order) recorded its
    commits wrote; one problem line per count that differs. Returns the counts checked."""
    syncs = list(syncs)
    last: dict[str, str] = {}  # the last sync that read each namespace (a current-state table's rows are its)
    for manifest in syncs:
        for ns in [*manifest.namespaces(), *manifest.outcomes]:
            if ns is not None:
                last[ns] = manifest.sync_id
    syncs = [m for m in syncs if m.rows]
    if not syncs:
        return 0
    tables = table_names(con)
    checked = 0
    for table in COUNTED:
        if f"raw.{table}" not in tables:
            continue
        current = table in CURRENT_STATE
        inserted = _found(con, table, "synced_at" if current else "_dlt_valid_from")
        retired = {} if current else _found(con, table, "_dlt_valid_to")
        for manifest in syncs:
            at = _utc(_time(manifest.header.get("synced_at")))
            if at is None:
                continue
            for ns, rows in sorted(manifest.rows.items()):
                if table not in rows or (current and last.get(ns) != manifest.sync_id):
                    continue
                checked += 1
                for what, expected, found in (("inserted", rows[table][0], inserted.get((ns, at), 0)),
                                              ("retired", rows[table][1], retired.get((ns, at), 0))):
                    if expected != found:
                        problems.append(
                            f"raw.{table} namespace {ns}: sync {manifest.sync_id} {what} {expected:,} row "
                            f"version{'' if expected == 1 else 's'}, {found:,} {'is' if found == 1 else 'are'} "
                            f"there ({_difference(expected, found, what)})")
    return checked


def _difference(expected: int, found: int, what: str) -> str:
    if found < expected:
        return f"{expected - found:,} deleted" if what == "inserted" else f"{expected - found:,} made current again"
    return f"{found - expected:,} added" if what == "inserted" else f"{found - expected:,} ended by hand"


def _time(value: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        return None
