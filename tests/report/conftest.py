"""A warehouse synced twice from the sandbox, with changes in between, and its report."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from diligence.analytics import rebuild_analytics
from diligence.steps import report_step
from diligence.warehouse import Warehouse
from sandbox import edits
from sandbox.server import SandboxServer
from tests.helpers import TODAY, copy_warehouse, query, sync


@dataclass
class Synced:
    warehouse: Path
    #: a copy of the warehouse after its first sync and build (read-only)
    first_sync: Path
    report: Path
    changed_answer: tuple[str, str, str]  # company_id, company_type_id, field_id
    changed_document: str
    deleted_document: str
    removed_connection: tuple[str, str]  # namespace_company_id, company_id


@pytest.fixture(scope="package")
def synced(tmp_path_factory: pytest.TempPathFactory, synced_small: Path) -> Iterator[Synced]:
    """Sync the small sandbox (a copy of `synced_small`) and build the models (a copy is
    kept), change an answer, a document's expiry, delete a document and drop a connection,
    sync again, build the models and write the report."""
    folder = tmp_path_factory.mktemp("report")
    warehouse = copy_warehouse(synced_small, folder / "warehouse.duckdb")
    with SandboxServer(scale="small", today=TODAY) as server:
        rebuild_analytics(warehouse)
        con = duckdb.connect(str(warehouse), read_only=True)
        try:
            ns, removed = con.execute(
                "select namespace_company_id, company_id from analytics.connections "
                "order by company_id desc limit 1"
            ).fetchone()  # type: ignore[misc]
            company, type_id, field_id = con.execute(
                "select company_id, company_type_id, field_id from analytics.answers "
                "where field_type = 'Input' and company_id <> ? order by all limit 1",
                [removed],
            ).fetchone()  # type: ignore[misc]
            changed, deleted = (
                row[0]
                for row in con.execute(
                    "select distinct document_id from analytics.document_expiry "
                    "where company_id <> ? order by 1 limit 2",
                    [removed],
                ).fetchall()
            )
        finally:
            con.close()
        first_sync = copy_warehouse(warehouse, folder / "first-sync" / "warehouse.duckdb")
        world = server.world
        edits.set_answer(world, company, type_id, field_id, {"value": "Revised answer"})
        edits.update_document(world, changed, set_fields={"expirationDate": "2021-03-04T00:00:00"})
        edits.delete_document(world, deleted)
        edits.remove_connection(world, ns, removed)
        assert not sync(server, warehouse).failed
        assert not rebuild_analytics(warehouse).failed_checks
    report = report_step(Warehouse(warehouse), folder / "report.html").path
    yield Synced(warehouse, first_sync, report, (company, type_id, field_id), changed, deleted,
                 (ns, removed))


def headline_totals(warehouse: Path) -> dict[str, int]:
    """The report's headline counts, from the marts themselves (never counting the
    namespaces' own companies as counterparties, whose expired and expiring documents are
    `own_expiring`)."""
    (row,) = query(
        warehouse,
        """
        select (select count(distinct company_id) from analytics.connections),
               (select count(*) from analytics.questionnaire_completeness where not is_own_company),
               (select count(*) from analytics.answers where is_answered and not is_own_company),
               (select count(*) from analytics.document_expiry
                where expiry_status = 'expired' and not is_own_company),
               (select count(*) from analytics.document_expiry
                where expiry_status = 'expiring' and not is_own_company),
               (select count(*) from analytics.document_expiry
                where expiry_status in ('expired', 'expiring') and is_own_company),
               (select count(*) from analytics.sync_issues)
        """,
    )
    keys = ("counterparties", "questionnaires", "answered_fields", "expired", "expiring",
            "own_expiring", "sync_issues")
    return dict(zip(keys, row, strict=True))
