"""What the HTML report shows, read from the warehouse in one read-only session.

Every number is a query over the `analytics` schema (the dbt project's marts: the
report reads nothing of `raw`); nothing is computed in the browser but paging and
sorting. Large lists travel as positional rows (``columns`` + ``rows``) to keep the file
small: with 10,000 counterparties the charts get aggregates, the tables get every row.

"What changed since the previous sync" is the change feed ``analytics.changes`` of each
namespace's latest successful sync: counts per kind, and the list (at most
:data:`MAX_CHANGES` rows; ``diligence changes`` gives them all). A namespace synced only
once has no previous sync: nothing is reported as changed there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any

import duckdb

from ..analytics.digest import KINDS
from ..errors import WarehouseNotReadyError
from ..warehouse import table_names

#: Tables the report cannot do without.
REQUIRED_TABLES = (
    "analytics.headline",
    "analytics.freshness",
    "analytics.connections",
    "analytics.questionnaire_completeness",
    "analytics.answers",
    "analytics.document_expiry",
    "analytics.sync_issues",
    "analytics.sync_runs",
    "analytics.namespaces",
    "analytics.changes",
)


@dataclass
class Table:
    """Rows for a client-side table: column names and positional rows."""

    columns: list[str]
    rows: list[list[Any]]


@dataclass
class ReportData:
    warehouse: str
    generated_at: datetime
    headline: dict[str, int]
    expiring_within_days: int
    evaluated_at: datetime | None
    freshness: Table
    timeline: list[dict[str, Any]]
    undated_documents: dict[str, int]
    expiring_documents: Table
    #: the namespaces' own companies' documents expired or expiring (not counterparties')
    own_expiring_documents: Table
    completeness: Table
    completeness_buckets: list[dict[str, Any]]
    changes: dict[str, Any]
    sync_issues: Table
    #: namespace_company_id -> the namespace company's name, where its details were read.
    namespace_names: dict[str, str] = field(default_factory=dict)


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat(sep=" ", timespec="seconds")
    if isinstance(value, date):
        return value.isoformat()
    return value


def _table(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> Table:
    cursor = con.execute(sql, params or [])
    columns = [d[0] for d in cursor.description]
    return Table(columns, [[_jsonable(v) for v in row] for row in cursor.fetchall()])


def _scalar(con: duckdb.DuckDBPyConnection, sql: str) -> Any:
    row = con.execute(sql).fetchone()
    return None if row is None else row[0]


def _require_tables(con: duckdb.DuckDBPyConnection, warehouse: Path | str) -> None:
    """Raise :class:`ReportError` saying what is missing when the warehouse of `con` has
    not got the tables the report reads."""
    tables = table_names(con)
    missing = [t for t in REQUIRED_TABLES if t not in tables]
    if missing:
        if not any(t.startswith("analytics.") for t in tables):
            raise WarehouseNotReadyError(
                f"{warehouse} has no analytics schema; run `diligence models --warehouse {warehouse}` first")
        raise WarehouseNotReadyError(
            f"{warehouse} lacks {missing[0]}; run `diligence models --warehouse {warehouse}` first")


# -- headline and freshness -------------------------------------------------------------
HEADLINE_SQL = """
select counterparty_count as counterparties, questionnaire_count as questionnaires,
       answered_field_count as answered_fields, document_count as documents,
       expired_document_count as expired, expiring_document_count as expiring,
       own_document_count as own_documents, own_expired_document_count as own_expired,
       own_expiring_document_count as own_expiring, sync_issue_count as sync_issues
from analytics.headline
"""

FRESHNESS_SQL = """
select namespace_company_id as namespace, last_success_at as last_success,
       last_status as last_outcome, last_error_message as last_error,
       successful_sync_count as successful_syncs,
       round(hours_since_last_success, 1) as age_hours
from analytics.freshness
order by namespace_company_id
"""


# -- documents --------------------------------------------------------------------------
TIMELINE_SQL = """
select cast(date_trunc('month', expiration_date) as date) as month, expiry_status as status,
       count(*) as documents
from analytics.document_expiry
where not is_own_company and expiry_status in ('expired', 'expiring', 'valid')
group by all
order by 1, 2
"""

#: documents expired or expiring: the counterparties' (`not is_own_company`), and apart
#: from them those of the namespaces' own companies, as analysts are told to count them
EXPIRING_SQL = """
select coalesce(company_name, company_id) as counterparty, namespace_company_id,
       company_type_id, document_name, category, type,
       cast(expiration_date as date) as expiration_date, days_until_expiry, expiry_status
from analytics.document_expiry
where {own}is_own_company and expiry_status in ('expired', 'expiring')
order by counterparty, company_id, days_until_expiry, document_id
"""

# -- completeness -----------------------------------------------------------------------
COMPLETENESS_SQL = """
with per_counterparty as (
    select company_id, any_value(company_name) as company_name,
           count(*) as questionnaires,
           count(distinct namespace_company_id) as namespaces,
           sum(answerable_fields) as answerable_fields,
           sum(answered_fields) as answered_fields
    from analytics.questionnaire_completeness
    where company_id <> namespace_company_id  -- a namespace's own questionnaire is no counterparty's
    group by company_id
),
names as (
    select company_id, any_value(company_name) as name from analytics.connections group by 1
)
select coalesce(p.company_name, names.name, p.company_id) as counterparty, p.company_id,
       p.namespaces, p.questionnaires, cast(p.answered_fields as bigint) as answered_fields,
       cast(p.answerable_fields as bigint) as answerable_fields,
       case when p.answerable_fields > 0
            then round(100.0 * p.answered_fields / p.answerable_fields, 1) end as completeness_pct
from per_counterparty p left join names using (company_id)
order by completeness_pct nulls first, counterparty
"""

# -- sync issues ------------------------------------------------------------------------
ISSUES_SQL = """
select i.namespace_company_id, i.endpoint, i.company_id,
       coalesce(n.counterparty, i.company_id) as counterparty, i.company_type_id, i.http_status,
       i.message, i.synced_at
from analytics.sync_issues i left join report_names n on n.company_id = i.company_id
order by i.namespace_company_id, i.endpoint, i.company_id, i.company_type_id
"""


# -- changes since the previous sync ----------------------------------------------------
SYNC_WINDOWS_SQL = """
with ok as (
    select namespace_company_id, coalesce(synced_at, started_at) as started_at,
           row_number() over (
               partition by namespace_company_id order by coalesce(synced_at, started_at) desc
           ) as recency
    from analytics.sync_runs where status = 'success'
)
select namespace_company_id,
       max(started_at) filter (where recency = 1) as latest_started_at,
       max(started_at) filter (where recency = 2) as previous_started_at
from ok group by 1
"""

#: (namespace_company_id, since): when each namespace's latest successful sync began
#: (its ``synced_at``, the ``detected_at`` of the changes it saw), for the namespaces that
#: had a successful sync before it.
WINDOWS = "report_windows"
#: (company_id, counterparty): a display name for every company the analytics know.
NAMES = "report_names"
#: Changes listed in the report (all are counted).
MAX_CHANGES = 1000


def _names(con: duckdb.DuckDBPyConnection) -> None:
    """Temp table NAMES: a display name for every company the analytics know."""
    con.execute(
        f"""
        create or replace temp table {NAMES} as
        select company_id, coalesce(any_value(company_name), company_id) as counterparty from (
            select company_id, company_name from analytics.connections
            union all select company_id, company_name from analytics.questionnaire_completeness
            union all select company_id, company_name from analytics.document_expiry
        ) group by company_id
        """
    )


def _changes(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    windows = con.execute(SYNC_WINDOWS_SQL).fetchall()
    compared = [(ns, latest) for ns, latest, previous in windows if previous is not None]
    con.execute(f"create or replace temp table {WINDOWS} (namespace_company_id varchar, since timestamptz)")
    if compared:
        con.executemany(f"insert into {WINDOWS} values (?, ?)", [list(row) for row in compared])
    latest = f"""
        select c.* from analytics.changes c join {WINDOWS} w using (namespace_company_id)
        where c.detected_at = w.since"""
    counts = dict(con.execute(f"select change_kind, count(*) from ({latest}) group by 1").fetchall())
    listed = _table(
        con,
        f"""
        select c.namespace_company_id, c.company_id,
               coalesce(c.company_name, c.company_id, '(the service)') as counterparty,
               c.change_kind, c.company_type_id,
               coalesce(c.item_label, c.field_id, c.document_id) as item, c.old_text as before,
               c.new_text as after, strftime(timezone('UTC', c.detected_at), '%Y-%m-%d %H:%M') as detected_at
        from ({latest}) c
        order by c.company_id is null, counterparty, c.company_id, c.change_kind, c.company_type_id, item,
                 c.namespace_company_id
        limit {MAX_CHANGES}
        """,
    )
    return {
        "available": True,
        "namespaces": [
            {"namespace": ns, "since": _jsonable(latest_at), "previous": _jsonable(previous)}
            for ns, latest_at, previous in sorted(windows)
        ],
        "counts": {kind: counts[kind] for kind in KINDS if kind in counts},
        "total": sum(counts.values()),
        "list": listed,
    }


# -- everything -------------------------------------------------------------------------
def collect(
    warehouse: Path | str,
    *,
    con: duckdb.DuckDBPyConnection,
    now: datetime | None = None,
) -> ReportData:
    """Read everything the report shows from `warehouse` through `con`, the step's
    session of it (left open); `warehouse` names it in the report and in errors."""
    now = now or datetime.now(timezone.utc)
    _require_tables(con, warehouse)
    con.execute("set TimeZone = 'UTC'")
    _names(con)
    cursor = con.execute(HEADLINE_SQL)
    names = [d[0] for d in cursor.description]
    headline = dict(zip(names, (int(v) for v in cursor.fetchone()), strict=True))  # type: ignore[union-attr]
    days, evaluated_at = con.execute(
        "select expiring_within_days, evaluated_at from analytics.headline"
    ).fetchone()  # type: ignore[misc]
    freshness = _table(con, FRESHNESS_SQL)

    timeline = [
        {"month": _jsonable(month), "status": status, "documents": int(n)}
        for month, status, n in con.execute(TIMELINE_SQL).fetchall()
    ]
    undated = dict(
        con.execute(
            "select expiry_status, count(*) from analytics.document_expiry "
            "where not is_own_company and expiry_status not in ('expired', 'expiring', 'valid') "
            "group by 1"
        ).fetchall()
    )
    completeness = _table(con, COMPLETENESS_SQL)
    buckets = [
        {"bucket": bucket, "low": low, "counterparties": int(n)}
        for bucket, low, n in con.execute(
            f"""
            with c as ({COMPLETENESS_SQL}),
            b as (
                select case
                    when completeness_pct is null then 'no fields'
                    when completeness_pct >= 100 then '100%'
                    else cast(cast(floor(completeness_pct / 10) * 10 as integer) as varchar)
                         || '–' || cast(cast(floor(completeness_pct / 10) * 10 + 10 as integer)
                         as varchar) || '%'
                end as bucket,
                coalesce(least(floor(completeness_pct / 10) * 10, 100), -10) as low
                from c
            )
            select bucket, low, count(*) from b group by all order by low
            """
        ).fetchall()
    ]
    namespace_names = dict(
        con.execute(
            "select namespace_company_id, namespace_name from analytics.namespaces "
            "where namespace_name is not null"
        ).fetchall()
    )
    return ReportData(
        warehouse=str(warehouse),
        generated_at=now,
        headline=headline,
        expiring_within_days=int(days),
        evaluated_at=evaluated_at,
        freshness=freshness,
        timeline=timeline,
        undated_documents={k: int(v) for k, v in undated.items()},
        expiring_documents=_table(con, EXPIRING_SQL.format(own="not ")),
        own_expiring_documents=_table(con, EXPIRING_SQL.format(own="")),
        completeness=completeness,
        completeness_buckets=buckets,
        changes=_changes(con),
        sync_issues=_table(con, ISSUES_SQL),
        namespace_names=namespace_names,
    )

