"""No secret at rest, whatever the configuration path: env vars, `.dlt/secrets.toml`, CLI
flags, or the Prefect Secret block the flow reads.

Each path runs what a user runs (two syncs, one downloading documents; on the env path
the first builds the models, and exports, the HTML report and status follow; for the
Prefect path the flow on the session's Prefect server, which builds the models and
writes exports and the report), then
every file under the warehouse's folder (dlt's pipelines dir is inside it), the reports,
the downloaded documents, the flow's Prefect home (its persisted results) and the
server's home (its SQLite database, its WAL and its log, with every other flow test's
runs in it too) is scanned for every form of the secrets (:mod:`secret_scan`), as is
every output. The sandbox's own password is a canary that appears nowhere else.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

import pytest

from sandbox.server import DEFAULT_EMAIL, SandboxServer
from tests.processes import base_env, free_port

from .secret_scan import leaks_in, scan, secret_forms

pytestmark = pytest.mark.slow

PASSWORD = "Leak-Canary-p4ssw0rd!"
EMAIL_ENV = "SOURCES__COMPANY_CONNECTIONS__EMAIL"
PASSWORD_ENV = "SOURCES__COMPANY_CONNECTIONS__PASSWORD"
REPO = Path(__file__).resolve().parents[2]


def _cli(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "PREFECT_"))}
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "diligence", *args], cwd=cwd, env=full, capture_output=True, timeout=300
    )


def _user_run(base_url: str, cwd: Path, env: dict[str, str], *, full: bool = True) -> list[bytes]:
    """sync (--debug), a sync with downloads into a second warehouse (its last dlt run
    is the downloads', so its trace differs), then, if `full`, models with the first sync,
    exports, report and status: their outputs. The models, the published copy and the
    reports read no credentials, and write the same whatever path gave the sync its
    credentials, so one path (env) builds and scans them, and the other paths' syncs
    skip them (each `sync` with models costs about 9 CPU s)."""
    outputs: list[bytes] = []
    steps = [
        ["--debug", "sync", "--base-url", base_url, "--warehouse", "data/w.duckdb",
         *([] if full else ["--no-models"])],
        ["sync", "--base-url", base_url, "--warehouse", "data/w2.duckdb",
         "--download-documents", "files", "--no-models"],
    ]
    if full:
        steps += [
            ["export", "--format", "csv", "--warehouse", "data/w.duckdb"],  # reports/<run>/
            ["export", "--format", "parquet", "--warehouse", "data/w.duckdb"],
            ["report", "--warehouse", "data/w.duckdb", "--out", "reports/report.html"],
            ["status", "--warehouse", "data/w.duckdb"],
        ]
    for args in steps:
        done = _cli(args, cwd, env)
        outputs += [done.stdout, done.stderr]
        assert done.returncode == 0, (args, done.stderr.decode()[-2000:])
    return outputs


def _by_env(tmp_path: Path) -> tuple[list[bytes], list[str]]:
    """Also with 5xx faults (retries are logged with --debug), and a failing run with a
    wrong password, whose error is printed: it must be clean too."""
    with SandboxServer(scale="small", password=PASSWORD) as server:
        server.faults.update({"token_lifetime": 2, "latency_ms": 5, "error_rate": 0.05})
        env = {EMAIL_ENV: DEFAULT_EMAIL, PASSWORD_ENV: PASSWORD}
        outputs = _user_run(server.base_url, tmp_path, env)
        failed = _cli(["--debug", "sync", "--base-url", server.base_url, "--warehouse", "data/w3.duckdb"],
                      tmp_path, {**env, PASSWORD_ENV: PASSWORD + "x"})
        assert failed.returncode == 1, failed.stderr.decode()[-2000:]
        outputs += [failed.stdout, failed.stderr]
        return outputs, list(server.app.auth.tokens_issued)


def _by_secrets_toml(tmp_path: Path) -> tuple[list[bytes], list[str]]:
    (tmp_path / ".dlt").mkdir()
    (tmp_path / ".dlt" / "secrets.toml").write_text(
        f'[sources.company_connections]\nemail = "{DEFAULT_EMAIL}"\npassword = "{PASSWORD}"\n'
    )
    with SandboxServer(scale="small", password=PASSWORD) as server:
        server.faults.update({"token_lifetime": 2, "latency_ms": 5})
        outputs = _user_run(server.base_url, tmp_path, {}, full=False)
        return outputs, list(server.app.auth.tokens_issued)


def _by_cli_flags(tmp_path: Path) -> tuple[list[bytes], list[str]]:
    """The CLI flags that can carry a secret: `sandbox --password`, and credentials
    inside `--base-url` (refused without echoing them). `sync` has no password flag."""
    port = free_port()
    log = tmp_path / "sandbox.log"  # scanned with everything else
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCES__")}
    with log.open("wb") as out:
        sandbox = subprocess.Popen(
            [sys.executable, "-m", "diligence", "--debug", "sandbox", "--port", str(port),
             "--password", PASSWORD, "--email", DEFAULT_EMAIL, "--token-lifetime", "2"],
            cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        base_url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            if b"Sandbox ready" in log.read_bytes():
                break
            assert sandbox.poll() is None, log.read_text()
            time.sleep(0.1)
        in_url = f"http://{quote(DEFAULT_EMAIL)}:{quote(PASSWORD)}@127.0.0.1:{port}"
        refused = _cli(["--debug", "sync", "--base-url", in_url, "--warehouse", "data/w.duckdb"],
                       tmp_path, {})
        assert refused.returncode == 2  # a setting's wrong value
        assert b"must not contain credentials" in refused.stderr
        outputs = [refused.stdout, refused.stderr]
        outputs += _user_run(
            base_url, tmp_path, {EMAIL_ENV: DEFAULT_EMAIL, PASSWORD_ENV: PASSWORD}, full=False
        )
    finally:
        sandbox.terminate()
        sandbox.wait(timeout=30)
    return outputs, []


FLOW_RUN = """
import sys
from prefect.blocks.system import Secret
Secret(value=sys.stdin.readline().strip()).save("company-connections-password", overwrite=True)
from flows.company_connections_sync import company_connections_sync
state = company_connections_sync(
    warehouse=sys.argv[1], reports_dir=sys.argv[2], base_url=sys.argv[3], return_state=True
)
print("flow run:", state.type.value)
"""


def _by_prefect_secret_block(tmp_path: Path, prefect_api: str) -> tuple[list[bytes], list[str]]:
    """The flow on a real local Prefect server, the password only in the Secret block;
    logs of dlt and diligence go to the API too, and task results are persisted."""
    home = tmp_path / "prefect-home"
    with SandboxServer(scale="small", password=PASSWORD) as sandbox:
        sandbox.faults.update({"token_lifetime": 2, "latency_ms": 5})
        env = base_env(home) | {
            "PREFECT_API_URL": prefect_api,
            "PREFECT_LOGGING_EXTRA_LOGGERS": "dlt,diligence",
            "PREFECT_RESULTS_PERSIST_BY_DEFAULT": "true",
            EMAIL_ENV: DEFAULT_EMAIL,
        }
        done = subprocess.run(
            [sys.executable, "-c", FLOW_RUN, str(tmp_path / "data" / "w.duckdb"),
             str(tmp_path / "reports"), sandbox.base_url],
            cwd=REPO, env=env, input=f"{PASSWORD}\n".encode(), capture_output=True, timeout=400,
        )
        assert b"flow run: COMPLETED" in done.stdout, done.stdout[-2000:] + done.stderr[-3000:]
        tokens = list(sandbox.app.auth.tokens_issued)
    return [done.stdout, done.stderr], tokens


PATHS = {
    "env": _by_env,
    "secrets_toml": _by_secrets_toml,
    "cli_flags": _by_cli_flags,
}


@pytest.mark.parametrize("configured_by", list(PATHS))
def test_no_secret_at_rest_whatever_the_configuration_path(tmp_path: Path, configured_by: str) -> None:
    outputs, tokens = PATHS[configured_by](tmp_path)
    _assert_no_secret_at_rest(tmp_path, configured_by, outputs, tokens)


def test_no_secret_at_rest_through_the_prefect_secret_block(
        tmp_path: Path, prefect_server_api: str, prefect_server_home: Path) -> None:
    outputs, tokens = _by_prefect_secret_block(tmp_path, prefect_server_api)
    _assert_no_secret_at_rest(tmp_path, "prefect_secret_block", outputs, tokens,
                              also=[prefect_server_home])


def _assert_no_secret_at_rest(tmp_path: Path, configured_by: str, outputs: list[bytes],
                              tokens: list[str], also: Sequence[Path] = ()) -> None:
    """No form of the secrets in `outputs`, nor in any file under `tmp_path` (but the
    user's own `.dlt/secrets.toml`) or the folders `also`; and the scan saw what it must."""
    if configured_by != "cli_flags":
        assert tokens, "the sandbox issued tokens: each one is looked for"
    forms = secret_forms(DEFAULT_EMAIL, PASSWORD, tokens)
    for blob in outputs:
        assert not leaks_in(blob, forms)
    roots = [path for path in tmp_path.iterdir() if path.name != ".dlt"] + list(also)
    scanned, found = scan(roots, forms)
    print(f"{configured_by}: {scanned} files scanned for {len(forms)} secret forms, {len(found)} with a secret")
    assert not found, found
    # the scan saw what it must see: warehouse, published copy, dlt's trace, reports
    names = {p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*") if p.is_file()}
    assert "data/w.duckdb" in names, sorted(names)
    if configured_by in ("env", "prefect_secret_block"):  # the paths that build the models
        assert "data/w-analytics.duckdb" in names, sorted(names)
    if configured_by != "prefect_secret_block":
        traces = {"data/.dlt-pipelines/w/company_connections/trace.pickle",
                  "data/.dlt-pipelines/w2/company_connections/trace.pickle"}
        assert traces <= names, sorted(names)
    else:
        assert any(n.startswith("data/.dlt-pipelines/") and n.endswith("trace.pickle") for n in names)
    if configured_by in ("env", "prefect_secret_block"):  # the paths that write reports
        assert any(n.startswith("reports/") and n.endswith("answers.csv") for n in names)
        assert any(n.startswith("reports/") and n.endswith("report.html") for n in names)
    if configured_by == "prefect_secret_block":
        server_files = {p.name for root in also for p in root.iterdir()}
        assert {"prefect.db", "server.log"} <= server_files, server_files
    else:
        assert any(n.startswith("files/") for n in names)
    assert scanned > 20
