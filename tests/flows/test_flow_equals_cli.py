"""The flow and the CLI are one composition: run side by side on the same sandbox, each
into its own warehouse, they leave the same tables, export the same files, report the
same namespaces and end alike; when nothing loads, both build nothing and fail naming
each namespace, in the same words."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest
from prefect.client.schemas.objects import State

from diligence.report.folders import latest_run
from flows.company_connections_sync import (
    DBT_BUILD_ARTIFACT_KEY,
    DOCUMENTS_ARTIFACT_KEY,
    SUMMARY_ARTIFACT_KEY,
    company_connections_sync,
)
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.cli.helpers import error_lines, run

from .conftest import EMAIL_ENV, PASSWORD_ENV, RunReader

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("prefect_harness", "credentials")]

LOGIN = {EMAIL_ENV: DEFAULT_EMAIL, PASSWORD_ENV: DEFAULT_PASSWORD}
#: what the CLI writes besides the exports: one HTML report, named as the flow names its
REPORT = "report.html"


def row_counts(warehouse: Path) -> dict[str, int]:
    """``schema.table`` -> its rows, for every table of `raw` and `analytics`."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        tables = con.execute(
            "select table_schema || '.' || table_name from information_schema.tables "
            "where table_schema in ('raw', 'analytics') order by 1").fetchall()
        return {table: con.execute(f"select count(*) from {table}").fetchall()[0][0] for (table,) in tables}


@dataclass(frozen=True)
class FlowRun:
    state: State
    warehouse: Path
    reports: Path
    artifacts: dict[str, Any]


@dataclass(frozen=True)
class CliRun:
    sync: subprocess.CompletedProcess[str]
    warehouse: Path
    #: the JSON summary of `diligence sync --json-summary`
    summary: dict[str, Any]
    #: the files `diligence export` (each format) and `diligence report` wrote
    files: list[str]


def run_flow(sandbox: SandboxServer, folder: Path, runs: RunReader) -> FlowRun:
    warehouse, reports = folder / "warehouse.duckdb", folder / "reports"
    state = company_connections_sync(base_url=sandbox.base_url, warehouse=str(warehouse),
                                     reports_dir=str(reports), return_state=True)
    artifacts = {a.key: a for a in runs.artifacts(state.state_details.flow_run_id)}
    return FlowRun(state, warehouse, reports, artifacts)


def run_cli(sandbox: SandboxServer, folder: Path, env: dict[str, str]) -> CliRun:
    """`diligence sync`, then (when it succeeded) `export` in each format and `report`."""
    folder.mkdir()
    synced = run(["sync", "--base-url", sandbox.base_url, "-w", "warehouse.duckdb",
                  "--json-summary", "run.json"], folder, env)
    files: list[str] = []
    if synced.returncode == 0:
        for fmt in ("csv", "parquet"):
            exported = run(["export", "-f", fmt, "-o", fmt, "-w", "warehouse.duckdb"], folder, env)
            assert exported.returncode == 0, exported.stderr
            files += sorted(p.name for p in (folder / fmt).iterdir())
        reported = run(["report", "-w", "warehouse.duckdb", "-o", REPORT], folder, env)
        assert reported.returncode == 0, reported.stderr
        files.append(REPORT)
    summary = json.loads((folder / "run.json").read_text())
    return CliRun(synced, folder / "warehouse.duckdb", summary, files)


def summary_row(namespace: dict[str, Any]) -> str:
    """The start of a namespace's row in the flow's summary, from the CLI's JSON summary."""
    status = "loaded" if namespace["status"] == "success" else "**failed**"
    return (f"| `{namespace['namespace_company_id']}` | {status} | {namespace['requests']} | "
            f"{namespace['rows']} | {namespace['row_versions_written']} | {namespace['issues']} |")


def test_the_flow_and_the_cli_leave_the_same_warehouse_files_and_summary(
    shared_sandbox: SandboxServer, tmp_path: Path, runs: RunReader
) -> None:
    flow = run_flow(shared_sandbox, tmp_path / "flow", runs)
    cli = run_cli(shared_sandbox, tmp_path / "cli", LOGIN)

    assert flow.state.is_completed(), flow.state.message
    assert cli.sync.returncode == 0, cli.sync.stderr
    assert cli.summary["status"] == "success"
    # the tables: the raw layer and every mart, row for row
    assert row_counts(flow.warehouse) == row_counts(cli.warehouse)
    for warehouse in (flow.warehouse, cli.warehouse):  # both published the analysts' copy
        assert warehouse.with_name("warehouse-analytics.duckdb").is_file()
    # the files: every report in every format, and the HTML report
    folder = latest_run(flow.reports)
    assert folder is not None
    assert sorted(p.name for p in folder.iterdir()) == sorted(cli.files)
    # what each says it did: the same namespaces, requests, rows and issues; the same models
    assert set(flow.artifacts) == {SUMMARY_ARTIFACT_KEY, DBT_BUILD_ARTIFACT_KEY, DOCUMENTS_ARTIFACT_KEY}
    summary = flow.artifacts[SUMMARY_ARTIFACT_KEY].data
    for namespace in cli.summary["namespaces"]:
        assert summary_row(namespace) in summary
    n = len(cli.summary["namespaces"])
    assert f"{n} of {n} namespaces loaded" in summary
    build = json.loads(flow.artifacts[DBT_BUILD_ARTIFACT_KEY].data)
    tables = {row["node"].removeprefix("model "): row["rows"] for row in build
              if row["node"].startswith("model ") and row["rows"] is not None}  # staging: views
    assert tables == cli.summary["models"]["row_counts"]
    assert not cli.summary["models"]["failed_checks"]
    assert {row["status"] for row in build if row["node"].startswith("check ")} == {"pass"}


def test_when_nothing_loads_neither_builds_and_both_fail_in_the_same_words(
    shared_sandbox: SandboxServer, tmp_path: Path, runs: RunReader, quick_retries: None
) -> None:
    shared_sandbox.faults.fail_namespaces = list(shared_sandbox.world.namespaces)
    try:
        flow = run_flow(shared_sandbox, tmp_path / "flow", runs)
        cli = run_cli(shared_sandbox, tmp_path / "cli", {**LOGIN, "SOURCES__COMPANY_CONNECTIONS__MAX_ATTEMPTS": "1"})
    finally:
        shared_sandbox.faults.fail_namespaces = []

    namespaces = shared_sandbox.world.namespaces
    assert flow.state.is_failed()
    assert cli.sync.returncode == 1
    assert cli.summary["status"] == "nothing_loaded"
    # the same failure, in the same words: each namespace named (the reasons are the
    # service's answers, which may name other requests of the same namespace)
    (line,) = error_lines(cli.sync.stderr)
    lead = f"nothing loaded, nothing built or published: {len(namespaces)} of {len(namespaces)} namespaces not loaded"
    for message in (flow.state.message, line.removeprefix("error: ")):
        assert message.startswith(lead), message
        assert all(f"{ns} (" in message for ns in namespaces), message
    # nothing built, exported, reported or published by either
    flow_tables, cli_tables = row_counts(flow.warehouse), row_counts(cli.warehouse)
    assert not [t for t in (*flow_tables, *cli_tables) if t.startswith("analytics.")]
    assert set(flow_tables) == set(cli_tables)
    for warehouse in (flow.warehouse, cli.warehouse):
        assert not warehouse.with_name("warehouse-analytics.duckdb").exists()
        with duckdb.connect(str(warehouse), read_only=True) as con:
            recorded = con.execute("select distinct namespace_company_id, status from raw.sync_runs").fetchall()
        assert sorted(recorded) == sorted((ns, "failed") for ns in namespaces)
    assert not flow.reports.exists() and cli.files == []
    # what each says it did: every namespace failed; the flow published its summary only
    assert set(flow.artifacts) == {SUMMARY_ARTIFACT_KEY}
    summary = flow.artifacts[SUMMARY_ARTIFACT_KEY].data
    assert f"0 of {len(namespaces)} namespaces loaded" in summary and "Nothing built" in summary
    assert {ns["status"] for ns in cli.summary["namespaces"]} == {"failed"}
    for namespace in cli.summary["namespaces"]:
        assert f"| `{namespace['namespace_company_id']}` | **failed** |" in summary
