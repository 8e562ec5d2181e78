"""Secrets at rest in the token store, and refused plain http.

The scan of every output and every file, for every configuration path (env vars,
`.dlt/secrets.toml`, CLI flags, the Prefect Secret block), is in
:mod:`tests.reliability.test_secrets_config_paths`.
"""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import httpx
import pytest

from sandbox.server import DEFAULT_EMAIL, SandboxServer
from tests.cli.helpers import run
from tests.helpers import query, sync

pytestmark = pytest.mark.slow

PASSWORD = "Leak-Canary-p4ssw0rd!"
#: Every JWT the sandbox issues starts with this header (HS256, typ JWT).
JWT_PREFIX = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=")


def _leaks(blob: bytes, secrets: list[bytes]) -> list[bytes]:
    return [secret for secret in secrets if secret in blob]


def test_token_only_mode_persists_renewed_token_with_0600(tmp_path: Path) -> None:
    store = tmp_path / "state" / "access_token"
    warehouse = tmp_path / "w.duckdb"
    with SandboxServer(scale="small") as server:
        server.faults.update({"token_lifetime": 3, "latency_ms": 30})
        token = httpx.post(f"{server.base_url}/api/auth", auth=(DEFAULT_EMAIL, "sandbox-password")).json()["token"]
        result = sync(
            server,
            warehouse,
            settings={
                "email": None,
                "password": None,
                "access_token": token,
                "token_store_path": str(store),
                "max_concurrency": 4,
            },
        )
        assert not result.failed
        assert stat.S_IMODE(store.stat().st_mode) == 0o600
        stored = store.read_text().strip()
        assert stored and stored != token, "the renewed token was saved"
        # the first token was invalidated by renewal: the stored one is what works now
        assert httpx.get(f"{server.base_url}/api/auth/user-info", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    assert query(warehouse, "select count(*) from raw.sync_runs where status = 'success'") == [(2,)]


def test_plain_http_to_a_remote_host_is_refused(tmp_path: Path) -> None:
    result = run(
        ["sync", "--base-url", "http://platform.example.com", "--warehouse", "w.duckdb", "--no-models"],
        tmp_path,
        {"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL, "SOURCES__COMPANY_CONNECTIONS__PASSWORD": PASSWORD},
    )
    assert result.returncode == 2  # a setting with an unsafe value, like any bad setting
    message = result.stderr
    assert "http" in message.lower() and "allow_insecure_http" in message
    assert PASSWORD not in message
