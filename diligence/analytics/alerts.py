"""What is new since the previous run: documents that newly expired or entered the
expiring window, and namespaces that failed. The scheduled flow sends it as a
notification (:mod:`flows.notify`); nothing is sent when nothing is new.

"Newly" is computed from the warehouse alone, so it needs no state of its own::

    previous run   = the latest analytics.sync_runs.synced_at before this run began
    status then    = the document's version current at that time (analytics.document_history),
                     classed against that time with the same window, by the project's
                     expiry rule (dbt macro `expiry_status`, sql/macros/expiry.sql),
                     the one document_expiry uses
    status now     = analytics.document_expiry (built by this run)

    newly expired  : expired now,  and not expired then (or not known then)
    newly expiring : expiring now, and neither expiring nor expired then (or not known then)

On the first run (no previous one) every expired or expiring document is new. A
document whose new version moved its date back into the window counts too: what
matters is the status readers saw last time. Failed namespaces are always news.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import duckdb

from ..safe_text import terminal_text
from .dbt import render_macro

__all__ = ["DocumentAlert", "RunAlerts", "run_alerts", "previous_run_at", "MAX_LISTED"]

#: Documents listed per section of a message; the rest are counted ("... and N more").
MAX_LISTED = 50

_NEWLY = """
with

now_ as (
    select * from analytics.document_expiry
    where expiry_status in ('expired', 'expiring')
),

versions_then as (
    select
        namespace_company_id, company_id, company_type_id, document_id,
        {status_then} as status_then
    from analytics.document_history
    where ?::timestamptz is not null
      and valid_from <= ?::timestamptz
      and (valid_to is null or valid_to > ?::timestamptz)
),

final as (
    select
        now_.namespace_company_id,
        now_.company_id,
        now_.company_name,
        now_.document_id,
        now_.document_name,
        now_.category,
        now_.expiry_status,
        cast(now_.expiration_date as date) as expiration_day,
        now_.days_until_expiry
    from now_
    left join versions_then using (namespace_company_id, company_id, company_type_id, document_id)
    where (now_.expiry_status = 'expired' and coalesce(status_then, '') <> 'expired')
       or (now_.expiry_status = 'expiring'
           and coalesce(status_then, '') not in ('expiring', 'expired'))
)

select * from final
order by expiration_day, company_name, document_name, namespace_company_id, document_id
"""


@dataclass(frozen=True)
class DocumentAlert:
    """A document that newly expired or entered the expiring window."""

    namespace_company_id: str
    company_id: str
    company_name: str | None
    document_id: str
    document_name: str | None
    category: str | None
    status: str  # "expired" | "expiring"
    expiration_day: str  # YYYY-MM-DD
    days_until_expiry: int

    def line(self) -> str:
        when = (
            f"expired {self.expiration_day}"
            if self.status == "expired"
            else f"expires {self.expiration_day} (in {self.days_until_expiry} days)"
        )
        kind = f" ({terminal_text(self.category)})" if self.category else ""
        company = terminal_text(self.company_name or self.company_id)
        document = terminal_text(self.document_name or self.document_id)
        return f"- {company}: {document}{kind}, {when}"


@dataclass
class RunAlerts:
    """What a run has to tell: new expiries, new entries into the window, failures."""

    previous_run_at: datetime | None
    expiring_within_days: int
    newly_expired: list[DocumentAlert] = field(default_factory=list)
    newly_expiring: list[DocumentAlert] = field(default_factory=list)
    #: (namespace, why) of each namespace this run could not load
    failed_namespaces: list[tuple[str, str]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.newly_expired or self.newly_expiring or self.failed_namespaces)

    def subject(self) -> str:
        parts = []
        if self.newly_expired:
            parts.append(f"{len(self.newly_expired)} documents newly expired")
        if self.newly_expiring:
            parts.append(
                f"{len(self.newly_expiring)} entered the {self.expiring_within_days}-day window"
            )
        if self.failed_namespaces:
            parts.append(f"{len(self.failed_namespaces)} namespaces failed")
        return "diligence: " + (", ".join(parts) or "nothing new")

    def body(self) -> str:
        since = (
            f"since the previous run ({self.previous_run_at:%Y-%m-%d %H:%M} UTC)"
            if self.previous_run_at is not None
            else "(first run)"
        )
        lines = [self.subject().removeprefix("diligence: ").capitalize() + f" {since}."]
        sections = [
            ("Newly expired", self.newly_expired),
            (f"Entered the {self.expiring_within_days}-day expiring window", self.newly_expiring),
        ]
        for title, alerts in sections:
            if alerts:
                lines += ["", f"{title} ({len(alerts)}):"]
                lines += [alert.line() for alert in alerts[:MAX_LISTED]]
                if len(alerts) > MAX_LISTED:
                    lines.append(f"... and {len(alerts) - MAX_LISTED} more")
        if self.failed_namespaces:
            lines += ["", f"Failed namespaces, previous data kept ({len(self.failed_namespaces)}):"]
            lines += [
                f"- {terminal_text(namespace)}: {terminal_text(why)}" for namespace, why in self.failed_namespaces
            ]
        return "\n".join(lines)


def previous_run_at(con: duckdb.DuckDBPyConnection, before: datetime) -> datetime | None:
    """The snapshot time of the latest sync that started before `before`, or None."""
    row = con.execute(
        "select max(synced_at) from analytics.sync_runs where synced_at < ?::timestamptz", [before]
    ).fetchone()
    return row[0] if row else None


def run_alerts(
    con: duckdb.DuckDBPyConnection,
    *,
    run_started_at: datetime,
    expiring_within_days: int,
    failed_namespaces: Sequence[tuple[str, str]] = (),
) -> RunAlerts:
    """What is new in the warehouse of `con` (a step's session: the models this run
    built) since the run before `run_started_at`; `failed_namespaces` are this run's
    failures, as (namespace, why)."""
    status_then = render_macro("expiry_status", "expiration_date", "is_expiration_date_invalid",
                               "?::timestamptz", "?::integer")
    con.execute("set TimeZone = 'UTC'")
    previous = previous_run_at(con, run_started_at)
    rows = con.execute(
        _NEWLY.format(status_then=status_then),
        [previous, previous, expiring_within_days, previous, previous, previous],
    ).fetchall()
    alerts = RunAlerts(
        previous_run_at=previous,
        expiring_within_days=expiring_within_days,
        failed_namespaces=list(failed_namespaces),
    )
    seen: set[tuple[str, str, str]] = set()
    for ns, company, name, doc, doc_name, category, status, day, days in rows:
        if (ns, company, doc) in seen:  # one line per document, not per company type
            continue
        seen.add((ns, company, doc))
        alert = DocumentAlert(
            namespace_company_id=ns,
            company_id=company,
            company_name=name,
            document_id=doc,
            document_name=doc_name,
            category=category,
            status=status,
            expiration_day=day.isoformat(),
            days_until_expiry=int(days),
        )
        (alerts.newly_expired if status == "expired" else alerts.newly_expiring).append(alert)
    return alerts
