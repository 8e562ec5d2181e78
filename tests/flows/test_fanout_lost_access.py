"""The fan-out flow plans its namespaces with the same planner as the CLI and the
one-process flow: a namespace synced before whose access was lost is run, and fails
the fan-out loudly, instead of going stale unseen."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

import flows.fanout as fanout
from diligence.report.folders import latest_run
from diligence.sync import run_sync, source_settings
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer

from .conftest import EMAIL_ENV, LOST_NAMESPACE, PASSWORD_ENV

pytestmark = pytest.mark.slow


def test_the_fanout_fails_loudly_for_a_namespace_whose_access_was_lost(
    prefect_harness: None, shared_sandbox: SandboxServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(EMAIL_ENV, DEFAULT_EMAIL)
    monkeypatch.setenv(PASSWORD_ENV, DEFAULT_PASSWORD)
    warehouse = tmp_path / "warehouse.duckdb"
    run_sync(warehouse, source_settings(base_url=shared_sandbox.base_url, namespaces=[shared_sandbox.world.namespaces[0]]))
    with duckdb.connect(str(warehouse)) as con:  # an earlier sync loaded a namespace user-info no longer lists
        con.execute("insert into raw.sync_runs select * replace (? as namespace_company_id) "
                    "from raw.sync_runs limit 1", [LOST_NAMESPACE])
    planned: list[str] = []

    def in_process(namespaces: list[str], parameters: dict[str, Any], deployment: str) -> dict[str, Any]:
        """The namespace runs as subflows here instead of deployments on a work pool."""
        planned.extend(namespaces)
        return {ns: fanout.sync_one_namespace(namespace=ns, **parameters, return_state=True) for ns in namespaces}

    monkeypatch.setattr(fanout, "fan_out", in_process)
    state = fanout.company_connections_fanout(warehouse=str(warehouse), base_url=shared_sandbox.base_url,
                                              reports_dir=str(tmp_path / "reports"), export_formats=["csv"],
                                              return_state=True)
    assert sorted(planned) == sorted([*shared_sandbox.world.namespaces, LOST_NAMESPACE])
    assert state.is_failed()
    assert f"1 of 3 namespaces not loaded (previous data kept): {LOST_NAMESPACE} (" in state.message
    with duckdb.connect(str(warehouse), read_only=True) as con:
        last = con.execute("select status from raw.sync_runs where namespace_company_id = ? "
                           "order by synced_at desc limit 1", [LOST_NAMESPACE]).fetchone()
    assert last == ("failed",)
    exported = latest_run(tmp_path / "reports")  # the run's own folder: exports and the HTML report
    assert exported is not None and {"answers.csv", "report.html"} <= {p.name for p in exported.iterdir()}
