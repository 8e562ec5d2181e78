"""A flow run after a crashed sync resumes it; `restart=True` reads everything again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from diligence.resume import resumable_namespaces
from diligence.warehouse import Warehouse
from flows.company_connections_sync import company_connections_sync
from sandbox.server import SandboxServer
from tests.reliability.test_resume import _kill_at

from .conftest import SharedRun

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _requests(server: SandboxServer) -> int:
    return int(httpx.get(f"{server.base_url}/_sandbox/stats").json()["total"])


def _crashed_sync(sandbox: SandboxServer, warehouse: Path, full: int) -> None:
    sandbox.faults.latency_ms = 20
    try:
        _kill_at(sandbox, warehouse, full // 2)
    finally:
        sandbox.faults.latency_ms = 0
    assert resumable_namespaces(Warehouse(warehouse))


@pytest.fixture
def full(default_run: SharedRun) -> int:
    """The requests of an uninterrupted flow run on the session's sandbox (read-only, so
    the same for every run)."""
    assert default_run.state.is_completed(), default_run.state.message
    return default_run.requests


@pytest.mark.parametrize("restart", [False, True])
def test_the_run_after_a_crash_resumes_unless_restarted(
    restart: bool, shared_sandbox: SandboxServer, credentials: dict[str, str], paths: dict[str, str],
    runs: Any, full: int,
) -> None:

    warehouse = Path(paths["warehouse"])
    _crashed_sync(shared_sandbox, warehouse, full)
    httpx.post(f"{shared_sandbox.base_url}/_sandbox/stats/reset")
    state = company_connections_sync(export_formats=["csv"], base_url=shared_sandbox.base_url, **paths,
                                     restart=restart, return_state=True)
    assert state.is_completed(), state.message
    rerun = _requests(shared_sandbox)
    kept = sum(o.requests_kept for o in state.result().namespaces)
    log = runs.log_text(state.state_details.flow_run_id)
    if restart:
        assert kept == 0
        assert rerun == full
    else:
        assert kept > 0
        assert rerun < full
        assert "resumed:" in log
    assert not resumable_namespaces(Warehouse(warehouse))
