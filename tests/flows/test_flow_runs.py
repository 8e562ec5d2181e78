"""The flow end to end against the sandbox, with the session's Prefect server as its API."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import pytest
from prefect import flow
from prefect.blocks.system import Secret

from diligence.analytics.checks import check_names
from diligence.report.export import REPORTS
from diligence.report.folders import latest_run
from flows.company_connections_sync import (
    DBT_BUILD_ARTIFACT_KEY,
    DOCUMENTS_ARTIFACT_KEY,
    SUMMARY_ARTIFACT_KEY,
    NamespacePlan,
    SyncAttempts,
    company_connections_sync,
    sync_namespaces,
)
from flows.service import PASSWORD_BLOCK
from sandbox.server import DEFAULT_PASSWORD, SandboxServer
from tests.helpers import query

from .conftest import LOST_NAMESPACE, UNKNOWN_NAMESPACE, SharedRun

EMAIL_ENV = "SOURCES__COMPANY_CONNECTIONS__EMAIL"
PASSWORD_ENV = "SOURCES__COMPANY_CONNECTIONS__PASSWORD"

pytestmark = pytest.mark.usefixtures("prefect_harness")

JWT = re.compile(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
ANALYTICS_TABLES = ("answers", "document_expiry", "connections", "questionnaire_completeness")


def assert_no_secrets(text: str) -> None:
    assert DEFAULT_PASSWORD not in text
    assert not JWT.search(text), "a token appears in published text"


def test_flow_syncs_builds_exports_and_publishes(
    shared_sandbox: SandboxServer, default_run: SharedRun, runs: Any
) -> None:
    state, paths = default_run.state, default_run.paths

    assert state.is_completed(), state.message
    for table in ANALYTICS_TABLES:
        assert query(paths["warehouse"], f"select count(*) from analytics.{table}")[0][0] > 0, table
    namespaces = shared_sandbox.world.namespaces
    loaded = query(
        paths["warehouse"], "select distinct namespace_company_id from analytics.connections"
    )
    assert {ns for (ns,) in loaded} == set(namespaces)

    published = Path(paths["warehouse"]).with_name("warehouse-analytics.duckdb")
    assert query(str(published), "select count(*) from analytics.answers")[0][0] > 0

    folder = latest_run(Path(paths["reports_dir"]))  # the run's own folder
    assert folder is not None
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [f"{report}.{ext}" for report in REPORTS for ext in ("csv", "parquet")] + ["report.html"]
    )
    html = (folder / "report.html").read_text()
    assert 'data-total="expired"' in html  # the report of this run's warehouse

    flow_run_id = state.state_details.flow_run_id
    artifacts = {a.key: a for a in runs.artifacts(flow_run_id)}
    assert set(artifacts) == {SUMMARY_ARTIFACT_KEY, DOCUMENTS_ARTIFACT_KEY, DBT_BUILD_ARTIFACT_KEY}
    build = json.loads(artifacts[DBT_BUILD_ARTIFACT_KEY].data)  # the dbt build, node by node
    answers = next(row for row in build if row["node"] == "model analytics.answers")
    assert answers["status"] == "built"
    assert answers["rows"] == query(paths["warehouse"], "select count(*) from analytics.answers")[0][0]
    checks = [row for row in build if row["node"].startswith("check ")]
    assert len(checks) == len(check_names()) and {row["status"] for row in checks} == {"pass"}
    summary = artifacts[SUMMARY_ARTIFACT_KEY]
    assert summary.type == "markdown"
    for namespace in namespaces:
        assert namespace in summary.data
    assert f"{len(namespaces)} of {len(namespaces)} namespaces loaded" in summary.data
    assert f"Analysts' copy: `{published}`" in summary.data
    assert f"HTML report (opens without network): [report.html]({(folder / 'report.html').resolve().as_uri()})" in summary.data
    head = (Path(paths["warehouse"]).with_name("warehouse.evidence") / "syncs" / "HEAD").read_text().split()[0]
    assert f"head `{head}`" in summary.data  # the evidence chain's head, kept outside the store

    table = artifacts[DOCUMENTS_ARTIFACT_KEY]
    assert table.type == "table"
    rows = json.loads(table.data)
    (urgent,) = query(
        paths["warehouse"],
        "select count(*) from analytics.document_expiry where expiry_status in ('expired', 'expiring')",
    )[0]
    assert 0 < len(rows) == urgent
    assert {row["expiry_status"] for row in rows} <= {"expired", "expiring"}
    days = [row["days_until_expiry"] for row in rows]
    assert days == sorted(days)

    for artifact in artifacts.values():
        assert_no_secrets(str(artifact.data) + str(artifact.description))
    assert_no_secrets(runs.log_text(flow_run_id))


def test_password_from_secret_block(
    shared_sandbox: SandboxServer,
    monkeypatch: pytest.MonkeyPatch,
    paths: dict[str, str],
    credentials: dict[str, str],
    runs: Any,
) -> None:
    monkeypatch.delenv(PASSWORD_ENV)
    assert os.environ[EMAIL_ENV]  # the e-mail still comes from env, the password from the block
    Secret(value=credentials["password"]).save(PASSWORD_BLOCK, overwrite=True)
    try:
        namespace = shared_sandbox.world.namespaces[0]
        state = company_connections_sync(
            namespaces=[namespace],
            export_formats=["csv"],
            base_url=shared_sandbox.base_url,
            **paths,
            return_state=True,
        )
    finally:
        Secret.delete(PASSWORD_BLOCK)

    assert state.is_completed(), state.message
    assert query(paths["warehouse"], "select count(*) from analytics.answers")[0][0] > 0
    flow_run_id = state.state_details.flow_run_id
    for artifact in runs.artifacts(flow_run_id):
        assert_no_secrets(str(artifact.data))
    assert_no_secrets(runs.log_text(flow_run_id))


def test_unknown_namespace_fails_the_run_at_once_naming_the_valid_ones(
    shared_sandbox: SandboxServer, credentials: dict[str, str], paths: dict[str, str], runs: Any
) -> None:
    good, bad = shared_sandbox.world.namespaces[0], UNKNOWN_NAMESPACE

    state = company_connections_sync(
        namespaces=[bad, good], base_url=shared_sandbox.base_url, **paths, return_state=True
    )

    assert state.is_failed()
    assert f"unknown namespace '{bad}'" in state.message
    assert f"user-info lists: {', '.join(shared_sandbox.world.namespaces)}" in state.message
    # nothing read, nothing recorded: the warehouse is not even created
    assert not Path(paths["warehouse"]).exists()
    task_runs = {t.name.rsplit("-", 1)[0]: t for t in runs.task_runs(state.state_details.flow_run_id)}
    assert task_runs["resolve-namespaces"].run_count == 1  # a mistake: never retried
    assert "sync-namespaces" not in task_runs


def test_namespace_whose_access_was_lost_fails_loudly(
    shared_sandbox: SandboxServer, lost_namespace_run: SharedRun, runs: Any
) -> None:
    lost, state, paths = LOST_NAMESPACE, lost_namespace_run.state, lost_namespace_run.paths

    assert state.is_failed()
    assert f"1 of 3 namespaces not loaded (previous data kept): {lost} (" in state.message
    assert "no longer lists it (access lost?)" in state.message
    task_runs = {t.name.rsplit("-", 1)[0]: t for t in runs.task_runs(state.state_details.flow_run_id)}
    assert task_runs["sync-namespaces"].run_count == 1  # access lost: another attempt cannot help
    loaded = query(
        paths["warehouse"], "select distinct namespace_company_id from analytics.answers"
    )
    assert {ns for (ns,) in loaded} == set(shared_sandbox.world.namespaces)
    recorded = query(paths["warehouse"], "select namespace_company_id, status from raw.sync_runs "
                     "where namespace_company_id = ? order by synced_at", lost)
    assert recorded[-1] == (lost, "failed")
    folder = latest_run(Path(paths["reports_dir"]))
    assert folder is not None and (folder / "answers.csv").is_file()
    summary = next(
        a for a in runs.artifacts(state.state_details.flow_run_id) if a.key == SUMMARY_ARTIFACT_KEY
    )
    assert "2 of 3 namespaces loaded" in summary.data and lost in summary.data


def test_wrong_password_fails_fast_without_retries(
    shared_sandbox: SandboxServer,
    credentials: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    paths: dict[str, str],
    runs: Any,
) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "not-the-password")
    started = time.monotonic()

    state = company_connections_sync(base_url=shared_sandbox.base_url, **paths, return_state=True)

    assert state.is_failed()
    assert time.monotonic() - started < 30  # the first retry alone would wait 10 s, the second 60 s
    assert "login rejected" in state.message
    assert "not-the-password" not in state.message
    task_runs = runs.task_runs(state.state_details.flow_run_id)
    assert [(t.name.rsplit("-", 1)[0], t.run_count) for t in task_runs] == [
        ("resolve-namespaces", 1)
    ]
    assert task_runs[0].state.is_failed()
    assert not Path(paths["warehouse"]).exists()


def attempts_of(namespace: str) -> SyncAttempts:
    """A sync of `namespace`, which user-info lists, not attempted yet."""
    return SyncAttempts(NamespacePlan(namespaces=[namespace], available=[namespace]))


@flow
def sync_one(namespace: str, warehouse: str, base_url: str) -> None:
    sync_namespaces(attempts_of(namespace), warehouse, base_url)


def test_sync_task_is_not_retried_on_bad_credentials(
    shared_sandbox: SandboxServer,
    credentials: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    paths: dict[str, str],
    runs: Any,
) -> None:
    monkeypatch.setenv(PASSWORD_ENV, "not-the-password")
    namespace = shared_sandbox.world.namespaces[0]

    state = sync_one(namespace, paths["warehouse"], shared_sandbox.base_url, return_state=True)

    assert state.is_failed() and "login rejected" in state.message
    (task_run,) = runs.task_runs(state.state_details.flow_run_id)
    assert task_run.name.rsplit("-", 1)[0] == "sync-namespaces"
    assert task_run.run_count == 1


@flow
def sync_one_quickly_retried(namespace: str, warehouse: str, base_url: str) -> None:
    sync_namespaces.with_options(retry_delay_seconds=0)(attempts_of(namespace), warehouse, base_url)


def test_sync_task_retries_an_unreachable_service(
    credentials: dict[str, str], monkeypatch: pytest.MonkeyPatch, paths: dict[str, str], runs: Any
) -> None:
    monkeypatch.setenv("SOURCES__COMPANY_CONNECTIONS__MAX_ATTEMPTS", "1")
    with SandboxServer(scale="small") as stopped:
        namespace = stopped.world.namespaces[0]
        base_url = stopped.base_url
    # the sandbox is stopped: every connection is refused

    state = sync_one_quickly_retried(namespace, paths["warehouse"], base_url, return_state=True)

    assert state.is_failed()
    (task_run,) = runs.task_runs(state.state_details.flow_run_id)
    assert task_run.run_count == 3  # the first attempt and both retries


def test_namespaces_are_synced_concurrently_in_one_task_run(
    shared_sandbox: SandboxServer, default_run: SharedRun, runs: Any
) -> None:
    state, paths = default_run.state, default_run.paths

    assert state.is_completed(), state.message
    task_runs = runs.task_runs(state.state_details.flow_run_id)
    syncs = [t for t in task_runs if t.name.startswith("sync-")]
    assert [(t.name.rsplit("-", 1)[0], t.run_count) for t in syncs] == [("sync-namespaces", 1)]
    windows = query(
        paths["warehouse"],
        "select sync_id, namespace_company_id, started_at, finished_at from raw.sync_runs "
        "where status = 'success' order by started_at",
    )
    assert {ns for _, ns, _, _ in windows} == set(shared_sandbox.world.namespaces)
    assert len({sync_id for sync_id, _, _, _ in windows}) == 1  # one sync, one token
    # every namespace was being fetched while every other one was: their windows overlap
    latest_start = max(started for _, _, started, _ in windows)
    earliest_end = min(finished for _, _, _, finished in windows)
    assert latest_start < earliest_end, windows
    # and each one is reported as its own outcome
    summary = next(
        a for a in runs.artifacts(state.state_details.flow_run_id) if a.key == SUMMARY_ARTIFACT_KEY
    )
    for namespace in shared_sandbox.world.namespaces:
        assert f"| `{namespace}` | loaded |" in summary.data


@pytest.mark.usefixtures("quick_retries")
def test_a_retry_reads_only_the_failed_namespaces(
    shared_sandbox: SandboxServer,
    credentials: dict[str, str],
    paths: dict[str, str],
    runs: Any,
) -> None:
    good, broken = shared_sandbox.world.namespaces[:2]
    shared_sandbox.faults.fail_namespaces = [broken]
    try:
        state = company_connections_sync(
            export_formats=["csv"], base_url=shared_sandbox.base_url, **paths, return_state=True
        )
    finally:
        shared_sandbox.faults.fail_namespaces = []

    assert state.is_failed()
    assert f"1 of 2 namespaces not loaded (previous data kept): {broken} (" in state.message
    syncs = [t for t in runs.task_runs(state.state_details.flow_run_id) if t.name.startswith("sync-")]
    # one task run, tried again twice by Prefect (its retries)
    assert [(t.name.rsplit("-", 1)[0], t.run_count) for t in syncs] == [("sync-namespaces", 3)]
    assert syncs[0].state.is_failed()
    attempts = dict(
        query(
            paths["warehouse"],
            "select namespace_company_id, count(*) from raw.sync_runs group by 1",
        )
    )
    assert attempts == {good: 1, broken: 3}  # read once, and the failed one twice more
    assert query(
        paths["warehouse"], "select distinct namespace_company_id from raw.connections"
    ) == [(good,)]
