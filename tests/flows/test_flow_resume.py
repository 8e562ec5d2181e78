"""A flow run after a crashed sync resumes it; `restart=True` reads everything again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from diligence.resume import resumable_journals
from diligence.warehouse import Warehouse
from flows.company_connections_sync import company_connections_sync
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.reliability.test_resume import _kill_at

EMAIL_ENV = "SOURCES__COMPANY_CONNECTIONS__EMAIL"
PASSWORD_ENV = "SOURCES__COMPANY_CONNECTIONS__PASSWORD"

pytestmark = pytest.mark.usefixtures("prefect_harness")


def _requests(server: SandboxServer) -> int:
    return int(httpx.get(f"{server.base_url}/_sandbox/stats").json()["total"])


def _crashed_sync(sandbox: SandboxServer, warehouse: Path, full: int) -> None:
    sandbox.faults.latency_ms = 20
    try:
        _kill_at(sandbox, warehouse, full // 2)
    finally:
        sandbox.faults.latency_ms = 0
    assert resumable_journals(Warehouse(warehouse))


@pytest.fixture(scope="module")
def full(prefect_harness: None, sandbox: SandboxServer,
         tmp_path_factory: pytest.TempPathFactory) -> int:
    """The requests of an uninterrupted flow run on the session's sandbox (read-only, so
    the same for every test of the module): one reference run for the module."""
    folder = tmp_path_factory.mktemp("reference")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(EMAIL_ENV, DEFAULT_EMAIL)
        patch.setenv(PASSWORD_ENV, DEFAULT_PASSWORD)
        patch.delenv("SOURCES__COMPANY_CONNECTIONS__ACCESS_TOKEN", raising=False)
        httpx.post(f"{sandbox.base_url}/_sandbox/stats/reset")
        reference = company_connections_sync(export_formats=["csv"], base_url=sandbox.base_url,
                                             warehouse=str(folder / "reference.duckdb"),
                                             reports_dir=str(folder / "reports"), return_state=True)
        assert reference.is_completed(), reference.message
        return _requests(sandbox)


@pytest.mark.parametrize("restart", [False, True])
def test_the_run_after_a_crash_resumes_unless_restarted(
    restart: bool, sandbox: SandboxServer, credentials: dict[str, str], paths: dict[str, str],
    runs: Any, full: int,
) -> None:

    warehouse = Path(paths["warehouse"])
    _crashed_sync(sandbox, warehouse, full)
    httpx.post(f"{sandbox.base_url}/_sandbox/stats/reset")
    state = company_connections_sync(export_formats=["csv"], base_url=sandbox.base_url, **paths,
                                     restart=restart, return_state=True)
    assert state.is_completed(), state.message
    rerun = _requests(sandbox)
    kept = sum(o.requests_kept for o in state.result().namespaces)
    log = runs.log_text(state.state_details.flow_run_id)
    if restart:
        assert kept == 0
        assert rerun == full
    else:
        assert kept > 0
        assert rerun < full
        assert "resumed:" in log
    assert not resumable_journals(Warehouse(warehouse))
