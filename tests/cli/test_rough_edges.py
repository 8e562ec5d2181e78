"""Rough edges a new user hits, each through the `diligence` command: whole
error lines and IDs off a terminal, failed attempts and a running first sync in
`status`, --wait that says it waited, --as-of that does not silently republish, a sync
that loaded nothing, export before models, schedule validation, the TOML/env spelling
of allow_insecure_http and the hint for Prefect's ephemeral-server timeout."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path

import duckdb
import pytest

from diligence.warehouse import writer_lock
from sandbox.server import SandboxServer

from .helpers import (
    CREDENTIALS,
    DILIGENCE,
    EMAIL,
    SECRET,
    SyncedFolder,
    error_lines,
    run,
    run_process,
)

pytestmark = pytest.mark.slow



@pytest.fixture(scope="module")
def synced(synced_folder: SyncedFolder, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This module's copy of a warehouse synced by `diligence sync` (its tests change it)."""
    return synced_folder.copy(tmp_path_factory.mktemp("synced"))


def published(warehouse: Path) -> Path:
    return warehouse.with_name(f"{warehouse.stem}-analytics.duckdb")


# -- error lines and IDs off a terminal -----------------------------------------------------
def test_error_lines_are_whole_off_a_terminal(tmp_path: Path) -> None:
    deep = tmp_path / ("a-rather-long-folder-name-" * 4) / "warehouse-with-a-long-name.duckdb"
    deep.parent.mkdir(parents=True)
    duckdb.connect(str(deep)).close()
    result = run(["export", "-w", str(deep), "--out", str(tmp_path / "out")], tmp_path)
    assert result.returncode == 2  # not ready yet: no models
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and str(deep) in line and len(line) > 120


def test_status_shows_full_ids_off_a_terminal(server: SandboxServer, synced: Path) -> None:
    result = run(["status", "-w", str(synced)], synced.parent)
    assert result.returncode == 0, result.stderr
    assert "…" not in result.stdout
    for ns in server.world.namespaces:
        assert ns in result.stdout


# -- status: failed attempts, a first sync running ---------------------------------------------
def test_status_records_a_failed_attempt(server: SandboxServer, synced: Path, tmp_path: Path) -> None:
    wrong = {**EMAIL, "SOURCES__COMPANY_CONNECTIONS__PASSWORD": "wrong-" + SECRET}
    failed = run(["sync", "--base-url", server.base_url, "-w", str(synced)], synced.parent, wrong)
    assert failed.returncode == 1
    status = run(["status", "-w", str(synced)], synced.parent)
    assert "Failed sync attempts" in status.stdout and "login rejected" in status.stdout
    data = json.loads(run(["status", "--json", "-w", str(synced)], synced.parent).stdout)
    assert "login rejected" in data["failed_attempts"][-1]["error"]
    assert "wrong-" + SECRET not in json.dumps(data)
    # a first sync that never got as far as a warehouse is in the status too
    first = run(["sync", "--base-url", server.base_url, "-w", "new.duckdb"], tmp_path, wrong)
    assert first.returncode == 1 and not (tmp_path / "new.duckdb").exists()
    fresh = run(["status", "-w", "new.duckdb"], tmp_path)
    assert fresh.returncode == 0, fresh.stderr
    assert "no sync has completed yet" in fresh.stdout and "login rejected" in fresh.stdout


def test_status_names_the_sync_creating_the_warehouse(tmp_path: Path) -> None:
    with SandboxServer(scale="small", password=SECRET) as slow:
        slow.faults.update({"latency_ms": 150.0})
        env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCES__")}
        process = subprocess.Popen(
            [DILIGENCE, "sync", "--base-url", slow.base_url, "-w", "w.duckdb", "--max-concurrency", "2"],
            cwd=tmp_path, env={**env, **CREDENTIALS}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            seen = ""
            while time.monotonic() < deadline and process.poll() is None:
                seen = run(["status", "-w", "w.duckdb"], tmp_path).stdout
                if "creating this warehouse" in seen:
                    break
                time.sleep(0.3)
            assert f"a sync (pid {process.pid}) is creating this warehouse" in seen
            data = json.loads(run(["status", "--json", "-w", "w.duckdb"], tmp_path).stdout)
            assert data["sync_running"] == {"pid": process.pid}
        finally:
            process.terminate()
            process.wait(timeout=30)


# -- --wait says it waited ---------------------------------------------------------------------
def test_wait_says_how_long_it_waited(synced: Path) -> None:
    """The command runs in a thread of this process while the test holds the writer
    lock: the lock is taken on an open file of its own (flock), so the two exclude each
    other as two processes do."""
    lock = synced.with_name(synced.name + ".lock")
    done: list[subprocess.CompletedProcess[str]] = []
    command = threading.Thread(target=lambda: done.append(
        run(["--verbose", "models", "-w", str(synced), "--wait", "60"], synced.parent)))
    with writer_lock(synced):
        command.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _opened(lock) < 2:
            time.sleep(0.1)  # until the command has the lock file open: it is waiting
        time.sleep(2)
    command.join(120)
    [result] = done
    assert result.returncode == 0, result.stderr
    line = next(line for line in result.stderr.splitlines() if line.startswith("waited "))
    seconds = float(line.split()[1].rstrip("s"))
    assert 1.5 <= seconds <= 60 and str(synced) in line
    assert "all data checks passed" in result.stdout


def _opened(path: Path) -> int:
    """How many file descriptors of this process have `path` open."""
    target = str(path.resolve())
    return sum(os.path.realpath(f"/proc/self/fd/{fd}") == target for fd in os.listdir("/proc/self/fd"))


# -- models --as-of in the past --------------------------------------------------------------
def test_models_as_of_in_the_past_does_not_silently_republish(
    synced_folder: SyncedFolder, tmp_path: Path
) -> None:
    synced = synced_folder.copy(tmp_path)  # its own: the module's copy stays built as of today
    copy = published(synced)
    before = copy.stat().st_mtime_ns
    refused = run(["models", "-w", str(synced), "--as-of", "2025-01-01"], synced.parent)
    assert refused.returncode == 2
    (line,) = error_lines(refused.stderr)
    assert "in the past" in line and "--publish" in line
    assert copy.stat().st_mtime_ns == before
    # a rebuild of a synced warehouse with its options, published as asked
    forced = run(["models", "-w", str(synced), "--as-of", "2025-01-01T00:00:00", "--expiring-within-days", "60",
                  "--publish"], synced.parent)
    assert forced.returncode == 0, forced.stderr
    assert "all data checks passed" in forced.stdout
    assert copy.stat().st_mtime_ns != before


# -- a sync that loaded nothing ---------------------------------------------------------------
def test_a_sync_that_loaded_nothing_builds_nothing(server: SandboxServer, synced: Path) -> None:
    copy = published(synced)
    before = copy.stat().st_mtime_ns
    with duckdb.connect(str(synced), read_only=True) as con:
        built = con.execute("select count(*) from analytics.sync_runs").fetchall()[0][0]
    failing = server.world.namespaces[0]
    server.faults.fail_namespaces = [failing]
    try:
        result = run(["sync", "--base-url", server.base_url, "-w", str(synced), "-n", failing],
                     synced.parent, {**CREDENTIALS, "SOURCES__COMPANY_CONNECTIONS__MAX_ATTEMPTS": "1"})
    finally:
        server.faults.fail_namespaces = []
    assert result.returncode == 1
    assert result.stdout == ""
    (line,) = error_lines(result.stderr)
    assert "nothing loaded" in line and failing in line
    assert "models built" not in result.stderr
    assert copy.stat().st_mtime_ns == before
    with duckdb.connect(str(synced), read_only=True) as con:
        assert con.execute("select count(*) from analytics.sync_runs").fetchall()[0][0] == built
        assert con.execute("select count(*) from raw.sync_runs where status = 'failed'").fetchall()[0][0] >= 1


# -- export before models ---------------------------------------------------------------------
def test_export_before_models_names_the_command(server: SandboxServer, tmp_path: Path) -> None:
    raw_only = run(["sync", "--base-url", server.base_url, "-w", "w.duckdb", "--no-models"], tmp_path, CREDENTIALS)
    assert raw_only.returncode == 0, raw_only.stderr
    result = run(["export", "-w", "w.duckdb", "--out", "out"], tmp_path)
    assert result.returncode == 2  # not ready yet, as for `report`
    (line,) = result.stderr.splitlines()
    assert "run `diligence models --warehouse w.duckdb` first" in line
    assert "Error" not in line and "Exception" not in line


# -- schedule validates first -----------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "word"),
    [(["--cron", "61 * * * *"], "--cron"), (["--cron", "0 6 * *"], "--cron"), (["--timezone", "Mars/Olympus"], "--timezone")],
)
def test_schedule_validates_cron_and_zone_before_printing(args: list[str], word: str, tmp_path: Path) -> None:
    result = run(["schedule", *args], tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and word in line


# -- hints in the spelling users type -------------------------------------------------------
def test_insecure_http_hint_in_toml_and_env_spelling(tmp_path: Path) -> None:
    result = run(["check", "--base-url", "http://service.example.com"], tmp_path, CREDENTIALS)
    assert result.returncode == 2  # a setting's unsafe value
    (line,) = error_lines(result.stderr)
    assert "[sources.company_connections]" in line and "allow_insecure_http = true" in line
    assert "SOURCES__COMPANY_CONNECTIONS__ALLOW_INSECURE_HTTP=true" in line


def test_ephemeral_prefect_timeout_gets_a_one_line_hint(tmp_path: Path) -> None:
    env = {
        "PREFECT_HOME": str(tmp_path / "prefect"),
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "0",
        "PREFECT_API_URL": "",
    }
    # a process of its own: Prefect reads its settings and starts (then leaves) its
    # temporary server in the process that asks for it
    result = run_process(["schedule", "-w", "w.duckdb"], tmp_path, env, timeout=120)
    assert result.returncode == 1
    (line,) = error_lines(result.stderr)
    assert "PREFECT_API_URL" in line and "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS" in line
    assert "Traceback" not in result.stderr and "stdout:" not in result.stderr
