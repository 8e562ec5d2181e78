"""The change feed as people read it: a digest of ``analytics.changes`` per counterparty.

``analytics.changes`` (sql/models/marts/changes.sql) holds one row per change a sync saw;
this module selects some of them and words them. `diligence changes` prints it (by
default the last sync's changes), the scheduled flow sends it as its notification
(:mod:`flows.notify`, the kinds of ``[notifications] kinds``; nothing when nothing
changed), and the HTML report and ``diligence status`` count it.

Selecting::

    since     None: the latest sync's changes; a sync id: changes of the syncs after it;
              a timestamp: changes detected at or after it
    company   one counterparty's (company_id)
    kinds     some change kinds (KINDS; None: every kind, empty: none), plus
              ``namespace_failed`` for a notification
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

import duckdb

from ..errors import KindError, SettingsError, WarehouseNotReadyError
from ..safe_text import terminal_text

__all__ = ["COLUMNS", "KINDS", "NOTIFY_KINDS", "MAX_LISTED", "Change", "Digest", "parse_kinds", "read_digest"]

#: every change_kind of analytics.changes, in the order a digest lists them
KINDS: tuple[str, ...] = (
    "connection_added", "connection_removed", "reading_rights_changed", "company_changed",
    "answer_added", "answer_changed", "answer_removed",
    "document_added", "document_changed", "document_removed",
    "document_newly_expiring", "document_newly_expired",
    "template_field_added", "template_field_removed", "template_field_changed",
    "service_key_added", "service_key_removed",
)
#: what a notification may carry: the change kinds and the namespaces a run could not load
NOTIFY_KINDS: tuple[str, ...] = (*KINDS, "namespace_failed")
#: changes listed in a digest's text; the rest are counted ("... and N more")
MAX_LISTED = 50


def parse_kinds(values: Iterable[str] | None, *, allowed: Sequence[str] = KINDS,
                what: str = "--kind") -> tuple[str, ...] | None:
    """Kinds from values (comma-separated, repeatable); None: every kind. Raises
    :class:`KindError` naming the unknown ones."""
    names = [name.strip() for value in (values or ()) for name in str(value).split(",") if name.strip()]
    if not names:
        return None
    unknown = [name for name in dict.fromkeys(names) if name not in allowed]
    if unknown:
        raise KindError(f"{what} {', '.join(unknown)}: no such change kind; choose from {', '.join(allowed)}")
    return tuple(kind for kind in allowed if kind in names)


@dataclass(frozen=True)
class Change:
    """One row of ``analytics.changes``, in its ids and in words."""

    sync_id: str
    detected_at: datetime
    namespace_company_id: str
    company_id: str | None
    company_name: str | None
    is_own_company: bool
    company_type_id: str | None
    field_id: str | None
    document_id: str | None
    change_kind: str
    #: the question's label, the document's name, the key path (None: the company itself)
    item_label: str | None
    old_value: str | None
    new_value: str | None
    #: old_value / new_value in words (dates as dates, options by label)
    old_text: str | None
    new_text: str | None
    response_sha256: str | None

    @property
    def field_label(self) -> str | None:
        """The question's or template field's label (answer and template changes)."""
        return self.item_label if self.change_kind.startswith(("answer_", "template_")) else None

    @property
    def document_name(self) -> str | None:
        """The document's name (document changes)."""
        return self.item_label if self.change_kind.startswith("document_") else None

    def row(self) -> dict[str, Any]:
        """The row as JSON values (timestamps in ISO 8601, UTC)."""
        values = asdict(self)
        values["detected_at"] = self.detected_at.astimezone(timezone.utc).isoformat()
        values["field_label"], values["document_name"] = self.field_label, self.document_name
        return values

    def line(self) -> str:
        """One line of the digest, in words (terminal-safe)."""
        kind = self.change_kind.replace("_", " ")
        where = f" [{self.company_type_id}]" if self.company_type_id else ""
        if self.change_kind.startswith("service_key_"):
            return terminal_text(f"- {kind}: {self.new_value or self.old_value} {self.item_label or self.field_id}")
        if self.change_kind.startswith("template_"):
            subject = f"{self.company_type_id} {self.item_label or self.field_id}"
        elif self.change_kind.startswith(("answer_", "document_")):
            subject = f"{self.item_label or self.field_id or self.document_id}{where}"
        else:
            subject = ""
        change = _arrow(self.old_text, self.new_text)
        text = f"- {kind}" + (f": {subject}" if subject else "") + (f": {change}" if change else "")
        return terminal_text(text)


def _arrow(old: str | None, new: str | None, width: int = 120) -> str:
    def short(value: str | None) -> str:
        if value is None:
            return "(none)"
        value = " ".join(value.split())
        return value if len(value) <= width else value[: width - 1] + "…"

    if old is None and new is None:
        return ""
    if old is None:
        return short(new)
    if new is None:
        return f"{short(old)} -> (none)"
    return f"{short(old)} -> {short(new)}"


@dataclass
class Digest:
    """Changes selected from ``analytics.changes``, and the namespaces a run could not load."""

    changes: list[Change] = field(default_factory=list)
    #: the syncs the digest covers (sync_id -> snapshot time), newest last
    syncs: dict[str, datetime] = field(default_factory=dict)
    #: the sync before the first covered one (None: a first sync, or none at all)
    previous_at: datetime | None = None
    #: the covered syncs were the first of every namespace they synced (nothing to compare)
    first_sync: bool = False
    #: (namespace, why) of each namespace a run could not load
    failed_namespaces: list[tuple[str, str]] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.changes or self.failed_namespaces)

    def counts(self) -> dict[str, int]:
        """Changes per kind, in the order of :data:`KINDS` (kinds with none left out)."""
        found = Counter(change.change_kind for change in self.changes)
        return {kind: found[kind] for kind in KINDS if kind in found}

    def since_text(self) -> str:
        if self.first_sync:
            return "first sync: nothing to compare with"
        if self.previous_at is not None:
            return f"since the previous sync ({self.previous_at:%Y-%m-%d %H:%M} UTC)"
        return "no sync yet" if not self.syncs else "since the first sync"

    def subject(self) -> str:
        parts = [f"{count} {kind.replace('_', ' ')}" for kind, count in self.counts().items()]
        if self.failed_namespaces:
            parts.append(f"{len(self.failed_namespaces)} namespaces failed")
        return "diligence: " + (", ".join(parts) if parts else "nothing changed")

    def body(self, limit: int = MAX_LISTED) -> str:
        """The digest: counts, then the changes grouped by counterparty, at most `limit`."""
        total = len(self.changes)
        head = f"{total} change{'' if total == 1 else 's'} {self.since_text()}."
        lines = [head]
        counts = self.counts()
        if counts:
            lines += ["", ", ".join(f"{kind.replace('_', ' ')}: {n}" for kind, n in counts.items())]
        listed = 0
        for title, group in self._groups():
            if listed >= limit:
                break
            lines += ["", title]
            for change in group[: limit - listed]:
                lines.append(change.line())
                listed += 1
        if total > listed:
            lines.append(f"... and {total - listed} more (diligence changes --json lists them all)")
        if self.failed_namespaces:
            lines += ["", f"Failed namespaces, previous data kept ({len(self.failed_namespaces)}):"]
            lines += [f"- {terminal_text(ns)}: {terminal_text(why)}" for ns, why in self.failed_namespaces]
        return "\n".join(lines)

    def _groups(self) -> list[tuple[str, list[Change]]]:
        """Changes per counterparty (by name), then those of the service itself."""
        order = {kind: i for i, kind in enumerate(KINDS)}
        companies: dict[tuple[str, str], list[Change]] = {}
        service: list[Change] = []
        for change in self.changes:
            if change.company_id is None:
                service.append(change)
            else:
                key = (change.company_name or change.company_id, change.company_id)
                companies.setdefault(key, []).append(change)
        groups = []
        for (name, company_id), group in sorted(companies.items()):
            group.sort(key=lambda c: (order[c.change_kind], c.company_type_id or "", c.field_id or "",
                                      c.document_id or ""))
            title = terminal_text(f"{name} ({company_id}):" if name != company_id else f"{company_id}:")
            groups.append((title, group))
        if service:
            service.sort(key=lambda c: (order[c.change_kind], c.company_type_id or "", c.field_id or ""))
            groups.append(("Questionnaire templates and the service's keys:", service))
        return groups


#: the columns of analytics.changes a digest reads, in the order of :class:`Change`
COLUMNS: tuple[str, ...] = tuple(Change.__dataclass_fields__)

_SELECT = f"""
select {", ".join(COLUMNS)}
from analytics.changes
where detected_at >= ?::timestamptz
    and (?::varchar is null or company_id = ?::varchar)
    and (?::varchar[] is null or list_contains(?::varchar[], change_kind))
order by detected_at, namespace_company_id, company_id, change_kind, company_type_id, field_id, document_id
"""


def _parse_since(since: str | datetime) -> datetime | str:
    if isinstance(since, datetime):
        return since if since.tzinfo else since.replace(tzinfo=timezone.utc)
    text = since.strip()
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return text  # a sync id
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def read_digest(
    con: duckdb.DuckDBPyConnection,
    *,
    since: str | datetime | None = None,
    company: str | None = None,
    kinds: Sequence[str] | None = None,
    failed_namespaces: Sequence[tuple[str, str]] = (),
) -> Digest:
    """The changes of the warehouse of `con` (its models built) selected as in the module
    docstring. Raises :class:`SettingsError` for a sync id that is not in
    ``analytics.sync_runs``."""
    con.execute("set TimeZone = 'UTC'")
    runs = con.execute(
        "select sync_id, min(synced_at) from analytics.sync_runs where status = 'success' "
        "group by sync_id order by 2"
    ).fetchall()
    times = {sync_id: synced_at for sync_id, synced_at in runs}
    start: datetime | None
    if since is None:
        start = runs[-1][1] if runs else None
    else:
        parsed = _parse_since(since)
        if isinstance(parsed, str):
            if parsed not in times:
                raise SettingsError(f"--since {parsed}: no such sync (analytics.sync_runs); give a sync id "
                                    "or a timestamp such as 2026-11-01T00:00:00Z")
            later = [t for t in times.values() if t > times[parsed]]
            start = min(later) if later else None
            if start is None:
                return Digest(previous_at=times[parsed], failed_namespaces=list(failed_namespaces))
        else:
            start = parsed
    digest = Digest(failed_namespaces=list(failed_namespaces))
    if start is None:
        return digest
    digest.syncs = {sync_id: at for sync_id, at in runs if at >= start}
    earlier = [at for _sync_id, at in runs if at < start]
    digest.previous_at = max(earlier) if earlier else None
    present = {row[0] for row in con.execute(
        "select column_name from duckdb_columns() where database_name = current_database() "
        "and schema_name = 'analytics' and table_name = 'changes'").fetchall()}
    if not set(COLUMNS) <= present:
        raise WarehouseNotReadyError("analytics.changes was built by an earlier release (it has no "
                                     f"{', '.join(c for c in COLUMNS if c not in present)}); run `diligence models`")
    kind_list = None if kinds is None else list(kinds)
    rows = con.execute(_SELECT, [start, company, company, kind_list, kind_list]).fetchall()
    digest.changes = [Change(*row) for row in rows]
    digest.first_sync = bool(digest.syncs) and not _compared(con, list(digest.syncs))
    return digest


def _compared(con: duckdb.DuckDBPyConnection, sync_ids: list[str]) -> bool:
    """Whether some namespace of these syncs had a successful sync before (so they
    were compared with something)."""
    row = con.execute(
        """
        select count(*) from analytics.sync_runs as now_
        where now_.sync_id in (select unnest(?::varchar[])) and now_.status = 'success'
          and exists (select 1 from analytics.sync_runs as before
                      where before.namespace_company_id = now_.namespace_company_id
                        and before.status = 'success' and before.synced_at < now_.synced_at)
        """,
        [sync_ids],
    ).fetchone()
    return bool(row and row[0])
