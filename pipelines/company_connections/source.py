"""The dlt source `company_connections` of one namespace's result, and its resources.

:func:`company_connections` does no I/O: it declares its resources with their write
dispositions and keys, scoped to that namespace, and the staged rows flow when dlt
extracts them. Current-state tables are replaced per namespace (``delete-insert``),
companies, connections, questionnaires and documents keep their history (``scd2``,
versions by ``content_hash``, valid from the run's ``synced_at``), and every merge is
scoped to the namespace's own rows. A namespace that failed is given to the source
too, but only its run log (``sync_runs``, ``sync_issues``) is loaded: nothing of its
data is committed, nothing of its history retired.

A selective run (``selected=("documents", ...)``) declares only the selected data
resources: dlt then runs no merge for the others, so their rows and history are left
exactly as they were (nothing retired), while the selected ones are merged as usual.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from datetime import datetime
from typing import Any

import dlt
import pyarrow as pa
from dlt.extract import DltResource

from .results import NamespaceResult, NamespaceSnapshot, SyncIssue
from .schema import CURRENT_STATE, HISTORY, TABLE_COLUMNS, WHOLE_RUN_ONLY, arrow_schema
from .staging import StagedTable, read_batches

__all__ = ["DATA_RESOURCES", "company_connections", "run_log", "selected_rows"]

#: dlt's config section of the source and its resources (``sources.company_connections``),
#: which it would otherwise take from this module's name
__source_name__ = "company_connections"


def _sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _staged(snapshot: NamespaceSnapshot, table: str) -> Iterator[pa.Table]:
    yield from read_batches(snapshot.tables.get(table) or StagedTable(table))


def _staged_resource(table: str, doc: str, **hints: Any) -> DltResource:
    """The resource that yields `table`'s staged rows of a namespace's snapshot (`doc`:
    what they are; `hints`: its write disposition and keys)."""

    def rows(snapshot: NamespaceSnapshot) -> Iterator[pa.Table]:
        yield from _staged(snapshot, table)

    rows.__doc__ = doc
    return dlt.resource(rows, name=table, columns=TABLE_COLUMNS[table], **hints)


_SCD2 = {"disposition": "merge", "strategy": "scd2", "row_version_column_name": "content_hash"}
_DATA_RESOURCES = {
    "user_roles": _staged_resource(
        "user_roles", "The namespace's role: names and company types, inside and outside.",
        primary_key=list(CURRENT_STATE["user_roles"]),
        write_disposition={"disposition": "merge", "strategy": "delete-insert"}),
    **{table: _staged_resource(table, doc, write_disposition=_SCD2) for table, doc in (
        ("questionnaire_templates", "Templates (endpoint 8) of every company type the namespace reads."),
        ("companies", "The namespace's own company and each connection's company (endpoint 4)."),
        ("connections", "Listed connections (5) with their detail and reading rights (6)."),
        ("questionnaires", "Answers (7) of every readable (company, company type), forms as JSON text."),
        ("documents", "Documents (10) of every readable (company, company type)."),
        ("service_keys", "Every key path the service sent per endpoint, and whether it is "
                         "modelled (see .keys)."),
    )},
}


@dlt.resource(name="sync_issues", columns=TABLE_COLUMNS["sync_issues"], write_disposition="append")
def sync_issues(rows: list[dict[str, Any]]) -> Iterator[pa.Table]:
    """Requests of the run that were denied (403), not found (404) or failed for good."""
    yield pa.Table.from_pylist(rows, schema=arrow_schema("sync_issues"))


@dlt.resource(name="sync_runs", columns=TABLE_COLUMNS["sync_runs"], write_disposition="append")
def sync_runs(rows: list[dict[str, Any]]) -> Iterator[pa.Table]:
    """One row per (sync, namespace): its outcome, counts and error."""
    yield pa.Table.from_pylist(rows, schema=arrow_schema("sync_runs"))


assert set(_DATA_RESOURCES) == {*CURRENT_STATE, *HISTORY}
#: Names of the data resources a run may select (the run log is always loaded;
#: ``service_keys`` only with every other one, see WHOLE_RUN_ONLY).
DATA_RESOURCES: tuple[str, ...] = tuple(name for name in _DATA_RESOURCES if name not in WHOLE_RUN_ONLY)


def _issue_row(sync_id: str, namespace: str, issue: SyncIssue, synced_at: datetime) -> dict[str, Any]:
    return {
        "sync_id": sync_id,
        "namespace_company_id": namespace,
        "endpoint": issue.endpoint,
        "company_id": issue.company_id,
        "company_type_id": issue.company_type_id,
        "http_status": issue.http_status,
        "message": issue.message,
        "synced_at": synced_at,
    }


def selected_rows(snapshot: NamespaceSnapshot, resources: Collection[str] | None = None) -> int:
    """Rows of the snapshot's tables that a run selecting `resources` loads."""
    return sum(t.rows for name, t in snapshot.tables.items() if resources is None or name in resources)


def run_log(
    result: NamespaceResult,
    sync_id: str,
    synced_at: datetime,
    resources: Collection[str] | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows of `sync_runs` and `sync_issues` that record `result`."""
    ns = result.namespace_company_id
    if isinstance(result, NamespaceSnapshot):
        issues = [_issue_row(sync_id, ns, issue, synced_at) for issue in result.issues]
        run = {
            "status": "success",
            "finished_at": result.finished_at,
            "rows_loaded": selected_rows(result, resources),
            "issues": len(result.issues),
            "error": None,
        }
    else:
        issues = [_issue_row(sync_id, ns, result.issue, synced_at)] if result.issue else []
        run = {
            "status": "failed",
            "finished_at": result.finished_at,
            "rows_loaded": 0,
            "issues": len(issues),
            "error": result.error,
        }
    runs = [
        {
            "sync_id": sync_id,
            "namespace_company_id": ns,
            "started_at": result.started_at,
            "requests": result.requests,
            "synced_at": synced_at,
            **run,
        }
    ]
    return runs, issues


@dlt.source(name="company_connections", max_table_nesting=0)
def company_connections(
    result: NamespaceResult,
    sync_id: str,
    synced_at: datetime | None = None,
    selected: Collection[str] | None = None,
) -> list[DltResource]:
    """The resources of one namespace's result: its staged tables and its run log.

    Args:
        result: a :class:`NamespaceSnapshot` (its staged tables are loaded, every merge
            scoped to the namespace) or a :class:`NamespaceFailure` (only its run log).
        sync_id: identifies the run in `sync_runs` and `sync_issues`.
        synced_at: the run's time, the scd2 boundary of every namespace of the run
            (default: the snapshot's).
        selected: names of the data resources to load (default: all of
            :data:`DATA_RESOURCES`); the others are not declared, so nothing of them
            is merged, deleted or retired.
    """
    ns = result.namespace_company_id
    when = synced_at or getattr(result, "synced_at", None) or result.started_at
    unknown = sorted(set(selected or ()) - set(_DATA_RESOURCES))
    if unknown:
        raise ValueError(f"unknown resource(s) {', '.join(unknown)}; expected some of {', '.join(_DATA_RESOURCES)}")
    runs, issues = run_log(result, sync_id, when, selected)
    resources: list[DltResource] = []
    if isinstance(result, NamespaceSnapshot):
        scope = f"{{table}}.namespace_company_id = {_sql_literal(ns)}"
        whole = selected is None or set(DATA_RESOURCES) <= set(selected)
        for name, resource in _DATA_RESOURCES.items():
            if not whole and (name in WHOLE_RUN_ONLY or name not in selected):  # type: ignore[operator]
                continue
            disposition: dict[str, Any]
            if name in HISTORY:
                disposition = {**_SCD2, "destination_scope": scope, "boundary_timestamp": when}
            else:
                disposition = {"disposition": "merge", "strategy": "delete-insert", "destination_scope": scope}
            resources.append(resource(result).apply_hints(write_disposition=disposition))  # type: ignore[func-returns-value]
    if issues:
        resources.append(sync_issues(issues))
    resources.append(sync_runs(runs))
    return resources
