"""Every CLI command, including error paths: in this process (:func:`helpers.run`), and
as the processes a user starts for the sandbox that serves until interrupted and the demo."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest

from diligence.report.folders import latest_run
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.files import csv_rows, parquet_rows
from tests.processes import Receiver

from .helpers import SECRET, SyncedFolder, run, run_process

DILIGENCE = [sys.executable, "-m", "diligence"]
COMMANDS = ["sync", "models", "export", "sandbox", "demo", "status", "schedule"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def synced(synced_folder: SyncedFolder, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This module's copy of the warehouse filled once by `diligence sync`, shared by the
    read-only tests (and rebuilt by `models`)."""
    result = synced_folder.result
    assert result.returncode == 0, result.stderr
    assert SECRET not in result.stdout + result.stderr
    assert "synced 2/2 namespaces" in result.stdout
    assert "all data checks passed" in result.stdout
    return synced_folder.copy(tmp_path_factory.mktemp("synced"))


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_is_useful(command: str | None, tmp_path: Path) -> None:
    result = run([command, "--help"] if command else ["--help"], tmp_path)
    assert result.returncode == 0
    assert "Usage" in result.stdout
    if command:
        assert len(result.stdout.splitlines()) > 6
    else:
        for name in COMMANDS:
            assert name in result.stdout


def test_sync_builds_raw_and_analytics(synced: Path) -> None:
    con = duckdb.connect(str(synced), read_only=True)
    try:
        assert con.execute("select count(*) from raw.questionnaires").fetchall()[0][0] > 0
        assert con.execute("select count(*) from analytics.answers").fetchall()[0][0] > 0
    finally:
        con.close()


def test_sync_wrong_password_is_one_clear_line(server: SandboxServer, tmp_path: Path) -> None:
    result = run(
        ["sync", "--base-url", server.base_url, "--warehouse", "w.duckdb"],
        tmp_path,
        {"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL, "SOURCES__COMPANY_CONNECTIONS__PASSWORD": "wrong-" + SECRET},
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert SECRET not in result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert "401" in errors[0] or "rejected" in errors[0].lower()


def test_sync_unreachable_service(tmp_path: Path) -> None:
    result = run(
        ["sync", "--base-url", "http://127.0.0.1:9", "--warehouse", "w.duckdb"],
        tmp_path,
        {
            "SOURCES__COMPANY_CONNECTIONS__EMAIL": "a@example.com",
            "SOURCES__COMPANY_CONNECTIONS__PASSWORD": SECRET,
            "SOURCES__COMPANY_CONNECTIONS__MAX_ATTEMPTS": "2",
        },
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "error:" in result.stderr
    assert SECRET not in result.stderr


def test_sync_missing_settings_say_which(tmp_path: Path) -> None:
    result = run(["sync", "--warehouse", "w.duckdb"], tmp_path)
    assert result.returncode == 2  # a setting that is not set: the command cannot run as given
    assert "base_url" in result.stderr and "SOURCES__COMPANY_CONNECTIONS__BASE_URL" in result.stderr
    result = run(["sync", "--warehouse", "w.duckdb", "--base-url", "http://127.0.0.1:9"], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "error: no credentials: set email and password (SOURCES__COMPANY_CONNECTIONS__EMAIL and "
        "SOURCES__COMPANY_CONNECTIONS__PASSWORD), or access_token (SOURCES__COMPANY_CONNECTIONS__ACCESS_TOKEN), in "
        ".dlt/secrets.toml or the environment")
    assert not (tmp_path / "w.duckdb").exists()


def test_sync_namespace_not_allowed(server: SandboxServer, tmp_path: Path) -> None:
    result = run(
        ["sync", "--base-url", server.base_url, "--warehouse", "w.duckdb", "--namespace", "no-such-company", "--no-models"],
        tmp_path,
        {"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL, "SOURCES__COMPANY_CONNECTIONS__PASSWORD": SECRET},
    )
    assert result.returncode == 1
    assert "no-such-company" in result.stderr and "not one of the user's companies" in result.stderr


def test_models_bad_as_of_and_missing_warehouse(tmp_path: Path) -> None:
    bad = run(["models", "--warehouse", "missing.duckdb"], tmp_path)
    assert bad.returncode == 2 and "no warehouse" in bad.stderr
    (tmp_path / "w.duckdb").touch()
    bad_ts = run(["models", "--warehouse", "w.duckdb", "--as-of", "yesterday"], tmp_path)
    assert bad_ts.returncode == 2 and "--as-of" in bad_ts.stderr


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_export_writes_readable_files(synced: Path, tmp_path: Path, fmt: str) -> None:
    result = run(["export", "--format", fmt, "--out", str(tmp_path), "--warehouse", str(synced)], tmp_path)
    assert result.returncode == 0, result.stderr
    names = {"answers", "document_expiry", "questionnaire_completeness", "connections", "answers_wide"}
    assert {p.name for p in tmp_path.iterdir()} == {f"{n}.{fmt}" for n in names}
    con = duckdb.connect(str(synced), read_only=True)
    try:
        for name in names:
            read = csv_rows if fmt == "csv" else parquet_rows
            assert len(read(tmp_path / f"{name}.{fmt}")) == con.execute(f"select count(*) from analytics.{name}").fetchall()[0][0]
    finally:
        con.close()


def test_export_bad_format(synced: Path, tmp_path: Path) -> None:
    result = run(["export", "--format", "xlsx", "--out", str(tmp_path), "--warehouse", str(synced)], tmp_path)
    assert result.returncode == 2 and "csv or parquet" in result.stderr


def test_status_reports_syncs_counts_and_freshness(synced: Path) -> None:
    result = run(["status", "--warehouse", str(synced)], synced.parent)
    assert result.returncode == 0, result.stderr
    for heading in ("Last syncs", "Freshness", "Row versions", "raw.questionnaires"):
        assert heading in result.stdout


def test_status_without_warehouse(tmp_path: Path) -> None:
    result = run(["status", "--warehouse", "nope.duckdb"], tmp_path)
    assert result.returncode == 2 and "no warehouse" in result.stderr


def test_sandbox_serves_until_interrupted(tmp_path: Path) -> None:
    process = subprocess.Popen(
        DILIGENCE + ["sandbox", "--port", "0", "--latency-ms", "1"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "Sandbox ready at http://127.0.0.1:" in line
        assert DEFAULT_PASSWORD in line  # only the sandbox's own default is ever printed
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=20)


def test_sandbox_bad_flag_value(tmp_path: Path) -> None:
    result = run(["sandbox", "--error-rate", "2"], tmp_path)
    assert result.returncode == 2 and "error_rate" in result.stderr


def test_demo_end_to_end(tmp_path: Path) -> None:
    """Also: it talks to its own sandbox only, no usage telemetry (dlt's is on by default;
    its endpoint here is a receiver on this machine)."""
    started = time.monotonic()
    with Receiver() as telemetry:
        result = run_process(["demo"], tmp_path, {"RUNTIME__DLTHUB_TELEMETRY_ENDPOINT": telemetry.url},
                             timeout=120)
    assert result.returncode == 0, result.stderr
    assert telemetry.payloads == []
    for words in ("namespaces", "connections", "questionnaires", "documents expired", "documents expiring", "Warehouse:", "Reports:"):
        assert words in result.stdout
    assert (tmp_path / "data" / "demo.duckdb").exists()
    run_folder = latest_run(tmp_path / "reports")  # the demo's run folder, named by reports/latest
    assert run_folder is not None
    assert f"Reports:   {Path('reports') / run_folder.name}/" in result.stdout
    for name in ("answers.csv", "answers_wide.parquet", "report.html"):
        assert (run_folder / name).exists()
    assert time.monotonic() - started < 120
