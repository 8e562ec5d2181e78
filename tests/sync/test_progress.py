"""Progress lines of a sync, as cron and Prefect see them (no terminal)."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import pytest
from rich.console import Console

from diligence.cli.progress import SyncProgress
from sandbox.server import SandboxServer
from tests.helpers import sync


def test_a_wait_is_shown_until_a_request_completes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="diligence.sync")
    progress = SyncProgress(console=Console(file=io.StringIO()), interval=0.0)
    with progress:
        progress.planned("ns-1", 10)
        progress.waiting("ns-1", "rate-limited, retrying in 1 s")
        progress.done("ns-1", 1, 2)
    lines = [r.getMessage() for r in caplog.records]
    assert "namespace ns-1: 0/10 requests, 0 rows; waiting: rate-limited, retrying in 1 s" in lines
    assert lines[-1] == "namespace ns-1: 1/10 requests, 2 rows"


def test_the_progress_line_and_the_summary_count_the_same_rows(sandbox: SandboxServer, warehouse: Path) -> None:
    """Rows received, counted once (where a row is staged): the progress line's count of a
    namespace is its outcome's, and status's raw row versions are what verify counts."""
    from diligence.audit.verify import verify_warehouse
    from diligence.warehouse import Warehouse

    progress = SyncProgress(console=Console(file=io.StringIO()))
    result = sync(sandbox, warehouse, progress=progress)
    assert {ns: progress.counts[ns].rows for ns in progress.counts} == \
        {o.namespace_company_id: o.rows for o in result.namespaces}
    versions = _versions(warehouse)
    assert result.versions_written == sum(n for table, n in versions.items() if table != "user_roles")
    verified = verify_warehouse(Warehouse(warehouse))
    assert verified.ok and verified.rows == sum(n for table, n in versions.items() if table != "service_keys")


def _versions(warehouse: Path) -> dict[str, int]:
    import duckdb

    tables = ("user_roles", "companies", "connections", "questionnaire_templates", "questionnaires", "documents",
              "service_keys")
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return {t: con.execute(f"select count(*) from raw.{t}").fetchone()[0] for t in tables}
