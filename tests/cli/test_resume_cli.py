"""`diligence sync` killed mid-way: `status` shows what it left, the next `sync` resumes
it and says so, `--restart` reads everything again."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx

from sandbox.server import SandboxServer
from tests.helpers import requests_answered
from tests.processes import kill_when

from .helpers import CREDENTIALS, DILIGENCE, run


def _reset(server: SandboxServer) -> None:
    httpx.post(f"{server.base_url}/_sandbox/stats/reset")


def _killed_sync(server: SandboxServer, warehouse: Path, after: int) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCES__")}
    process = subprocess.Popen(
        [DILIGENCE, "sync", "--no-models", "--base-url", server.base_url, "-w", str(warehouse)],
        cwd=warehouse.parent, env={**env, **CREDENTIALS},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kill_when(process, lambda: requests_answered(server) >= after)


def test_killed_sync_shows_in_status_then_resumes_and_restart_starts_afresh(
        server: SandboxServer, tmp_path: Path) -> None:
    args = ["sync", "--no-models", "--base-url", server.base_url]
    _reset(server)
    assert run([*args, "-w", str(tmp_path / "full.duckdb")], tmp_path, CREDENTIALS).returncode == 0
    full = requests_answered(server)

    warehouse = tmp_path / "warehouse.duckdb"
    server.faults.latency_ms = 20
    try:
        _reset(server)
        _killed_sync(server, warehouse, full // 2)
    finally:
        server.faults.latency_ms = 0

    status = run(["status", "--json", "-w", str(warehouse)], tmp_path)
    assert status.returncode == 0, status.stderr
    resumable = json.loads(status.stdout)["resumable"]
    assert resumable and all(j["requests_kept"] > 0 and j["since"] for j in resumable)
    shown = run(["status", "-w", str(warehouse)], tmp_path)
    assert "the next sync resumes these" in shown.stdout
    # nothing half-done is published: the models refuse until the sync is finished
    refused = run(["models", "-w", str(warehouse)], tmp_path)
    assert refused.returncode == 2
    (line,) = refused.stderr.splitlines()
    assert line.startswith("error: not building or publishing: the last sync of ")
    assert all(j["namespace_company_id"] in line for j in resumable)
    assert line.endswith("rerun `diligence sync` to finish it (nothing half-done is published)")
    assert not (tmp_path / "warehouse-analytics.duckdb").exists()

    _reset(server)
    resumed = run([*args, "-w", str(warehouse)], tmp_path, CREDENTIALS)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming," in resumed.stderr and "requests kept from" in resumed.stderr
    assert "; resumed: " in resumed.stdout
    assert requests_answered(server) < full
    assert json.loads(run(["status", "--json", "-w", str(warehouse)], tmp_path).stdout)["resumable"] == []
    built = run(["models", "-w", str(warehouse)], tmp_path)
    assert built.returncode == 0, built.stderr

    # --restart: a journal left by another kill is discarded, everything is read again.
    server.faults.latency_ms = 20
    try:
        _reset(server)
        _killed_sync(server, warehouse, full // 2)
    finally:
        server.faults.latency_ms = 0
    _reset(server)
    restarted = run([*args, "--restart", "-w", str(warehouse)], tmp_path, CREDENTIALS)
    assert restarted.returncode == 0, restarted.stderr
    assert "resum" not in restarted.stderr + restarted.stdout
    assert requests_answered(server) == full
