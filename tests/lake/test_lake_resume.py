"""A `diligence sync` into a lake, SIGKILLed half-way, is resumed by the next one and
lands what a file warehouse's uninterrupted sync lands."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from diligence.warehouse import lake
from diligence.warehouse.location import WarehouseLocation
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.helpers import requests_answered, sync
from tests.processes import kill_when

pytestmark = pytest.mark.slow

DILIGENCE = [sys.executable, "-m", "diligence"]
CURRENT = """
    select 'companies', namespace_company_id, content_hash from raw.companies where _dlt_valid_to is null
    union all select 'connections', namespace_company_id, content_hash from raw.connections
        where _dlt_valid_to is null
    union all select 'questionnaires', namespace_company_id, content_hash from raw.questionnaires
        where _dlt_valid_to is null
    union all select 'documents', namespace_company_id, content_hash from raw.documents
        where _dlt_valid_to is null
"""


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(scale="small") as sandbox:
        yield sandbox


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DILIGENCE_"))}
    env.update({"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
                "SOURCES__COMPANY_CONNECTIONS__PASSWORD": DEFAULT_PASSWORD})
    return env


def test_a_killed_lake_sync_resumes_exactly(
        server: SandboxServer, lake_location: WarehouseLocation, tmp_path: Path) -> None:
    reference = tmp_path / "reference.duckdb"
    httpx.post(f"{server.base_url}/_sandbox/stats/reset")
    sync(server, reference)
    full = requests_answered(server)

    args = [*DILIGENCE, "sync", "--no-models", "--base-url", server.base_url,
            "--warehouse", lake_location.uri, "--data-path", str(lake_location.data_path)]
    server.faults.latency_ms = 30
    httpx.post(f"{server.base_url}/_sandbox/stats/reset")
    process = subprocess.Popen(args, cwd=tmp_path, env=_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        kill_when(process, lambda: requests_answered(server) >= full // 2, seconds=200)
    finally:
        server.faults.latency_ms = 0
    answered = requests_answered(server)

    httpx.post(f"{server.base_url}/_sandbox/stats/reset")
    resumed = subprocess.run(args, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=400)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming," in resumed.stderr or "not read again" in resumed.stderr
    assert requests_answered(server) <= full - answered + 16 + 2 + len(server.world.namespaces)

    import duckdb

    with duckdb.connect(str(reference), read_only=True) as con:
        expected = sorted(con.execute(CURRENT).fetchall())
    con = lake.connect(lake_location, read_only=True)
    try:
        assert sorted(con.execute(CURRENT).fetchall()) == expected
    finally:
        con.close()
