"""What a run reads back from the warehouse to say what it did.

    recorded_outcomes   each namespace's outcome as its sync recorded it (raw.sync_runs)
    evidence_of         the evidence chain's head and counts (as ``diligence status``)
    expiring_documents  the documents expired or expiring, most urgent first
    notify_kinds        the change kinds a notification carries, as configured
    change_digest       the changes a run detected, with the namespaces it could not load

The flows publish them (the run summary, the expiring-documents table, the
notification); they reach the warehouse through here and :mod:`diligence.steps`, never
through its modules. Each reads in one read-only session; what it reads with is loaded
when it is called.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .config import notification_kinds
from .warehouse import table_names

if TYPE_CHECKING:  # also the types the flows annotate with: they import them from here
    from .analytics.digest import Digest
    from .sync import NamespaceOutcome
    from .warehouse import Warehouse

__all__ = ["change_digest", "evidence_of", "expiring_documents", "notify_kinds", "recorded_outcomes"]

#: each namespace's latest row of raw.sync_runs since a time, as a NamespaceOutcome's fields
_RECORDED_SQL = """
select namespace_company_id, arg_max(status, finished_at), arg_max(requests, finished_at),
       arg_max(rows_loaded, finished_at), arg_max(issues, finished_at),
       arg_max(epoch(finished_at) - epoch(started_at), finished_at), arg_max(error, finished_at)
from raw.sync_runs where started_at >= ? group by 1
"""

EXPIRING_DOCUMENTS_SQL = """
select
    namespace_company_id,
    company_id,
    company_name,
    company_type_id,
    document_id,
    document_name,
    category,
    type,
    expiration_date,
    days_until_expiry,
    expiry_status
from analytics.document_expiry
where expiry_status in ('expired', 'expiring')
order by days_until_expiry, namespace_company_id, company_id, company_type_id, document_id
"""


def recorded_outcomes(warehouse: Warehouse, since: datetime) -> dict[str, NamespaceOutcome]:
    """Namespace -> its outcome as the latest of its syncs started since `since` recorded
    it in ``raw.sync_runs`` (a namespace none of them recorded is left out)."""
    from .sync import NamespaceOutcome  # start-up (dlt 0.9 s of imports): see steps.sync_step

    return {
        namespace: NamespaceOutcome(
            namespace_company_id=namespace, status=status, requests=int(requests or 0),
            rows=int(rows or 0), issues=int(issues or 0), duration_seconds=float(seconds or 0.0),
            error=error)
        for namespace, status, requests, rows, issues, seconds, error
        in warehouse.sync_runs(_RECORDED_SQL, [since])
    }


def evidence_of(warehouse: Warehouse) -> dict[str, Any] | None:
    """The evidence kept for `warehouse`: path, head, syncs, responses, bytes (None: it
    keeps none); the ``evidence`` of ``diligence status --json``."""
    from .evidence.chain import evidence_summary  # start-up: the evidence store's modules

    return evidence_summary(warehouse)


def expiring_documents(warehouse: Warehouse, limit: int) -> tuple[list[dict[str, Any]], int]:
    """The documents expired or expiring (``analytics.document_expiry``), most urgent
    first: up to `limit` rows, each column -> value (timestamps in UTC), and how many
    there are in all."""
    with warehouse.session(read_only=True, memory_limit=None) as con:
        con.execute("set TimeZone = 'UTC'")
        (total,) = con.execute(f"select count(*) from ({EXPIRING_DOCUMENTS_SQL})").fetchone()
        cursor = con.execute(f"{EXPIRING_DOCUMENTS_SQL} limit {int(limit)}")
        columns = [d[0] for d in cursor.description]
        rows = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
    return rows, int(total)


def notify_kinds(value: list[str] | None = None) -> tuple[str, ...]:
    """The kinds a notification carries: `value`, else config ``[notifications] kinds``,
    else every kind (:data:`diligence.analytics.digest.NOTIFY_KINDS`); a kind that does not
    exist is a :class:`~diligence.errors.KindError` naming the valid ones."""
    from .analytics.digest import NOTIFY_KINDS, parse_kinds  # start-up: see change_digest

    return parse_kinds(notification_kinds(value), allowed=NOTIFY_KINDS, what="[notifications] kinds") \
        or NOTIFY_KINDS


def change_digest(
    warehouse: Warehouse,
    *,
    since: datetime,
    kinds: Sequence[str],
    failed_namespaces: Sequence[tuple[str, str]] = (),
) -> Digest:
    """The changes of `kinds` detected since `since` (``analytics.changes``, see
    :mod:`diligence.analytics.digest`), with `failed_namespaces` ((namespace, why) of
    each one the run could not load). A warehouse without models yet (its first sync
    loaded nothing) has no changes: only those namespaces."""
    from .analytics.digest import (  # start-up (dbt 2.1 s of imports): the analytics package
        Digest,
        read_digest,
    )

    with warehouse.session(read_only=True, memory_limit=None) as con:
        if not {"analytics.sync_runs", "analytics.changes"} <= table_names(con):
            return Digest(failed_namespaces=list(failed_namespaces))
        return read_digest(con, since=since, kinds=kinds, failed_namespaces=failed_namespaces)
