"""Secrets never leave: not in output, logs, tables, pipeline state, published copies or exports."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from diligence.sandbox.server import DEFAULT_EMAIL, SandboxServer
from tests.helpers import query, sync

pytestmark = pytest.mark.slow

PASSWORD = "Leak-Canary-p4ssw0rd!"
#: Every JWT the sandbox issues starts with this header (HS256, typ JWT).
JWT_PREFIX = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=")


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCES__")}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "diligence", *args], cwd=cwd, env=full_env, capture_output=True, timeout=300
    )


def _leaks(blob: bytes, secrets: list[bytes]) -> list[bytes]:
    return [secret for secret in secrets if secret in blob]


def test_no_secret_in_any_output_or_file(tmp_path: Path) -> None:
    secrets = [PASSWORD.encode(), base64.b64encode(f"{DEFAULT_EMAIL}:{PASSWORD}".encode()), JWT_PREFIX]
    env = {
        "SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
        "SOURCES__COMPANY_CONNECTIONS__PASSWORD": PASSWORD,
    }
    outputs: list[bytes] = []
    with SandboxServer(scale="small", password=PASSWORD) as server:
        server.faults.update({"token_lifetime": 2, "error_rate": 0.05, "latency_ms": 10})
        synced = _cli(
            ["--debug", "sync", "--base-url", server.base_url, "--warehouse", "data/w.duckdb",
             "--download-documents", "files"],
            tmp_path,
            env,
        )
        outputs += [synced.stdout, synced.stderr]
        assert synced.returncode == 0, synced.stderr.decode()[-2000:]
        # a failing run prints its error: it must be clean too
        failed = _cli(["sync", "--base-url", server.base_url, "--warehouse", "data/w2.duckdb"], tmp_path,
                      {**env, "SOURCES__COMPANY_CONNECTIONS__PASSWORD": PASSWORD + "x"})
        assert failed.returncode == 1
        outputs += [failed.stdout, failed.stderr]
    for fmt in ("csv", "parquet"):
        exported = _cli(["export", "--format", fmt, "--out", "reports", "--warehouse", "data/w.duckdb"], tmp_path, env)
        assert exported.returncode == 0
        outputs += [exported.stdout, exported.stderr]
    status = _cli(["status", "--warehouse", "data/w.duckdb"], tmp_path, env)
    outputs += [status.stdout, status.stderr]

    for blob in outputs:
        assert not _leaks(blob, secrets)
    scanned = 0
    for path in tmp_path.rglob("*"):
        if path.is_file():
            scanned += 1
            assert not _leaks(path.read_bytes(), secrets), f"secret found in {path}"
    # the warehouse, dlt's pipeline state, the published copy, reports and downloads were all scanned
    names = {p.name for p in tmp_path.rglob("*") if p.is_file()}
    assert {"w.duckdb", "w-analytics.duckdb", "answers.csv", "answers.parquet"} <= names
    assert any(p.suffix == ".pdf" or "files" in p.parts for p in tmp_path.rglob("*") if p.is_file())
    assert scanned > 20


@pytest.mark.parametrize("configured_by", ["env", "secrets_toml"])
def test_no_secret_in_dlt_pipeline_files(tmp_path: Path, configured_by: str) -> None:
    """dlt's trace, state and load packages keep no secret, however the password is given.

    A plain sync (no downloads, models built) is the run whose trace is left on disk.
    """
    secrets = [PASSWORD.encode(), base64.b64encode(f"{DEFAULT_EMAIL}:{PASSWORD}".encode()), JWT_PREFIX]
    env: dict[str, str] = {}
    if configured_by == "env":
        env = {
            "SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
            "SOURCES__COMPANY_CONNECTIONS__PASSWORD": PASSWORD,
        }
    else:
        (tmp_path / ".dlt").mkdir()
        (tmp_path / ".dlt" / "secrets.toml").write_text(
            f'[sources.company_connections]\nemail = "{DEFAULT_EMAIL}"\npassword = "{PASSWORD}"\n'
        )
    with SandboxServer(scale="small", password=PASSWORD) as server:
        synced = _cli(["sync", "--base-url", server.base_url, "--warehouse", "data/w.duckdb"], tmp_path, env)
    assert synced.returncode == 0, synced.stderr.decode()[-2000:]
    assert not _leaks(synced.stdout + synced.stderr, secrets)
    pipelines_dir = tmp_path / "data" / ".dlt-pipelines"
    traces = list(pipelines_dir.rglob("trace.pickle"))
    assert traces, "dlt's trace is where resolved config values land: it must be scanned"
    for path in (tmp_path / "data").rglob("*"):
        if path.is_file():
            assert not _leaks(path.read_bytes(), secrets), f"secret found in {path}"
    # owner-only at the top: nothing below it (dlt makes its own folders) is reachable by others
    for folder in (pipelines_dir, pipelines_dir / "w"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_token_only_mode_persists_renewed_token_with_0600(tmp_path: Path) -> None:
    store = tmp_path / "state" / "access_token"
    warehouse = tmp_path / "w.duckdb"
    with SandboxServer(scale="small") as server:
        server.faults.update({"token_lifetime": 3, "latency_ms": 30})
        token = httpx.post(f"{server.base_url}/api/auth", auth=(DEFAULT_EMAIL, "sandbox-password")).json()["token"]
        result = sync(
            server,
            warehouse,
            source_options={
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
    result = _cli(
        ["sync", "--base-url", "http://platform.example.com", "--warehouse", "w.duckdb", "--no-models"],
        tmp_path,
        {"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL, "SOURCES__COMPANY_CONNECTIONS__PASSWORD": PASSWORD},
    )
    assert result.returncode == 1
    message = result.stderr.decode()
    assert "http" in message.lower() and "allow_insecure_http" in message
    assert PASSWORD not in message
