"""The CLI on a lake, as users run it: `diligence sync --namespace X` processes write one
lake at the same time, then `diligence models` builds the analytics; done twice
(idempotent: the second round adds no version and rebuilds the analytics over the first
round's), they equal a file warehouse's built from the same sandbox. Bad locations
stop in one line with nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from diligence.analytics import rebuild_analytics
from diligence.warehouse import lake
from diligence.warehouse.location import WarehouseLocation
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.cli.helpers import run
from tests.helpers import sync
from tests.processes import free_port

from .postgres import PostgresCluster

DILIGENCE = [sys.executable, "-m", "diligence"]
AS_OF = "2026-11-01T06:00:00"
TIMEOUT = 400
#: columns that differ between two syncs of the same data (when, which run)
VOLATILE = ("_dlt_", "sync_id", "synced_at", "loaded_at", "evaluated_at", "started_at",
            "finished_at", "valid_from", "valid_to", "_at", "hours_since", "duration",
            "seconds")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(scale="small") as sandbox:
        yield sandbox


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SOURCES__", "DILIGENCE_"))}
    env.update({"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
                "SOURCES__COMPANY_CONNECTIONS__PASSWORD": DEFAULT_PASSWORD, **extra})
    return env


def _start(args: list[str], cwd: Path, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(DILIGENCE + args, cwd=cwd, env=_env(**env), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """In this process (:func:`tests.cli.helpers.run`); the concurrent syncs are processes."""
    return run(args, cwd, {"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
                           "SOURCES__COMPANY_CONNECTIONS__PASSWORD": DEFAULT_PASSWORD, **env})


def _finish(process: subprocess.Popen[str]) -> tuple[int, str, str]:
    try:
        out, err = process.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    return process.returncode, out, err


def analytics_rows(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple]]:
    """Every analytics table's rows, sorted, without the columns that say when/which run."""
    tables = [r[0] for r in con.execute(
        "select table_name from information_schema.tables where table_catalog = "
        "current_database() and table_schema = 'analytics' order by 1").fetchall()
        if not r[0].endswith("__build")]  # the next build's spares (sql/README.md)
    rows: dict[str, list[tuple]] = {}
    for table in tables:
        columns = [c for (c,) in con.execute(
            "select column_name from information_schema.columns where table_catalog = "
            "current_database() and table_schema = 'analytics' and table_name = ? "
            "order by ordinal_position", [table]).fetchall()
            if not any(v in c for v in VOLATILE)]
        listed = ", ".join(f'"{c}"' for c in columns)
        rows[table] = sorted(
            con.execute(f'select {listed} from analytics."{table}"').fetchall(), key=repr)
    return rows


@pytest.mark.timeout(900)
def test_concurrent_namespace_syncs_then_models_equal_a_file_warehouse(
    server: SandboxServer, lake_location: WarehouseLocation, tmp_path: Path
) -> None:
    namespaces = server.truth()["namespaces"]
    assert len(namespaces) == 2
    options = ["--warehouse", lake_location.uri, "--data-path", str(lake_location.data_path),
               "--base-url", server.base_url]
    for _ in range(2):  # twice: the second round changes nothing, and rebuilds analytics
        processes = [_start(["sync", "--no-models", "--namespace", ns, *options], tmp_path)
                     for ns in namespaces]
        for process in processes:
            code, out, err = _finish(process)
            assert code == 0, (out, err)
            assert "synced 1/1 namespaces" in out
        built = _run(["models", "--as-of", AS_OF, *options[:4]], tmp_path)
        assert built.returncode == 0, built.stderr
        assert "a lake: analysts ATTACH it read-only" in " ".join(built.stdout.split())
    assert not list(tmp_path.rglob("*-analytics.duckdb"))  # no published copy for a lake

    reference = tmp_path / "reference.duckdb"
    sync(server, reference)  # twice, as the lake
    sync(server, reference)
    rebuild_analytics(reference, as_of=__import__("datetime").datetime.fromisoformat(AS_OF))
    with duckdb.connect(str(reference), read_only=True) as con:
        expected = analytics_rows(con)
    con = lake.connect(lake_location, read_only=True)
    try:
        actual = analytics_rows(con)
        # no loss, no duplicates: every raw version once, both namespaces
        per_ns = dict(con.execute(
            "select namespace_company_id, count(*) from raw.companies "
            "where _dlt_valid_to is null group by 1").fetchall())
        runs = con.execute("select count(*) from raw.sync_runs").fetchone()[0]
    finally:
        con.close()
    assert set(per_ns) == set(namespaces)
    assert runs == 4  # two namespaces, two syncs each
    assert set(actual) == set(expected) and len(expected) >= 5
    for table in expected:
        assert actual[table] == expected[table], table

    # status, export and report read the lake through the same options
    status = _run(["status", *options[:4]], tmp_path)
    assert status.returncode == 0 and "Freshness" in status.stdout, status.stderr
    exported = _run(["export", "--format", "csv", "--out", str(tmp_path / "x"), *options[:4]],
                    tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "x" / "connections.csv").stat().st_size > 0
    report = _run(["report", "--out", str(tmp_path / "r.html"), *options[:4]], tmp_path)
    assert report.returncode == 0 and (tmp_path / "r.html").stat().st_size > 0, report.stderr


def _one_error_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def test_bad_locations_stop_in_one_line_with_nothing_written(
    postgres: PostgresCluster, tmp_path: Path
) -> None:
    data = tmp_path / "lakedata"
    conninfo = postgres.create_database("lake_bad")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cases = {
        "names no database": ["--warehouse", "ducklake:postgres:host=127.0.0.1",
                              "--data-path", str(data)],
        "unsupported warehouse URI": ["--warehouse", "ducklake:mysql:db=x",
                                      "--data-path", str(data)],
        "needs a data path": ["--warehouse", "ducklake:postgres:" + conninfo],
        "cannot reach the DuckLake catalog": [
            "--warehouse",
            f"ducklake:postgres:dbname=x host=127.0.0.1 port={free_port()} password=hunter2 "
            "connect_timeout=3",
            "--data-path", str(data)],
        "cannot be written": ["--warehouse", "ducklake:postgres:" + conninfo,
                              "--data-path", str(blocker / "sub")],
    }
    for expected, args in cases.items():
        for command in (["sync", "--base-url", "http://127.0.0.1:9"], ["models"]):
            line = _one_error_line(_run([*command, *args], tmp_path))
            assert expected in line, (expected, line)
            assert "hunter2" not in line
    assert not data.exists()
    assert not (tmp_path / "data").exists()  # no dlt folders either
    # the catalog database stayed empty: nothing of DuckLake's was created in it
    con = duckdb.connect()
    try:
        lake._load_extensions(con)
        con.execute(f"attach '{conninfo}' as pg (type postgres, read_only)")
        assert con.execute(
            "select count(*) from duckdb_tables() where database_name = 'pg' "
            "and schema_name = 'public'").fetchone()[0] == 0
    finally:
        con.close()


def test_refused_credentials_into_a_lake_give_one_line(
    server: SandboxServer, lake_location: WarehouseLocation, tmp_path: Path
) -> None:
    """A sync that cannot run at all is recorded as a failed attempt only for a file
    warehouse; on a lake the credentials' own error still reaches the user, in one line."""
    options = ["--warehouse", lake_location.uri, "--data-path", str(lake_location.data_path),
               "--base-url", server.base_url]
    wrong = "wrong-" + DEFAULT_PASSWORD
    done = _run(["sync", "--no-models", *options], tmp_path,
                SOURCES__COMPANY_CONNECTIONS__PASSWORD=wrong)
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "credentials" in errors[0].lower(), done.stderr
    assert "Traceback" not in done.stderr and wrong not in done.stderr + done.stdout
