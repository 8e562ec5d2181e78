"""A one-off run of the flow, as the README gives it (``python -m flows.company_connections_sync``),
with no Prefect API configured: Prefect starts a temporary server for it, and nothing of
the run leaves the machine. Prefect's telemetry is off without the user setting anything
(the tests' own processes set ``PREFECT_SERVER_ANALYTICS_ENABLED``; this one does not):
no HTTPS connection is opened beyond loopback, and no "Failed to send telemetry" line
reaches the output, as it did offline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.processes import REPO, ProxyTrap, base_env

pytestmark = pytest.mark.slow

RUN_SECONDS = 240


def test_a_one_off_run_on_a_temporary_server_sends_no_telemetry(
    shared_sandbox: SandboxServer, tmp_path: Path
) -> None:
    with ProxyTrap() as proxy:
        env = base_env(tmp_path / "home") | proxy.env | {
            "PYTHONPATH": str(REPO),
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
            "SOURCES__COMPANY_CONNECTIONS__BASE_URL": shared_sandbox.base_url,
            "SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
            "SOURCES__COMPANY_CONNECTIONS__PASSWORD": DEFAULT_PASSWORD,
        }
        del env["PREFECT_SERVER_ANALYTICS_ENABLED"]
        done = subprocess.run(
            [sys.executable, "-m", "flows.company_connections_sync"], cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=RUN_SECONDS,
        )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert "Starting temporary server" in output  # no API was configured
    assert "Finished in state Completed" in output, output[-3000:]
    assert "telemetry" not in output.lower(), output[-3000:]
    assert proxy.targets == [], "something was sent out (Prefect's telemetry?)"
