"""Fixtures of the flow tests: the session's Prefect server as the API, the sandbox,
credentials in env vars, and helpers reading runs back through the Prefect client."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

# Prefect reads its settings when it is imported: give the whole session a private
# PREFECT_HOME and no profile's API URL, before anything imports prefect.
_PREFECT_HOME = tempfile.mkdtemp(prefix="diligence-prefect-home-")
atexit.register(shutil.rmtree, _PREFECT_HOME, ignore_errors=True)
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"] = "120"
for _name in ("PREFECT_API_URL", "PREFECT_API_KEY", "PREFECT_PROFILE", "PREFECT_PROFILES_PATH"):
    os.environ.pop(_name, None)

import duckdb
import prefect.context
import prefect.settings
import pytest
from prefect import get_client
from prefect.client.schemas.filters import (
    ArtifactFilter,
    ArtifactFilterFlowRunId,
    FlowRunFilter,
    FlowRunFilterId,
    LogFilter,
    LogFilterFlowRunId,
    TaskRunFilter,
)
from prefect.client.schemas.objects import Artifact, State, TaskRun
from prefect.client.schemas.sorting import ArtifactSort, TaskRunSort
from prefect.events.worker import EventsWorker
from prefect.logging.handlers import APILogHandler, APILogWorker

import flows.company_connections_sync as flow_module
from diligence.sync import run_sync, source_settings
from flows.company_connections_sync import company_connections_sync
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.helpers import requests_answered

EMAIL_ENV = "SOURCES__COMPANY_CONNECTIONS__EMAIL"
PASSWORD_ENV = "SOURCES__COMPANY_CONNECTIONS__PASSWORD"
READ_LIMIT = 200


@pytest.fixture(scope="session")
def prefect_harness(prefect_server_api: str) -> Iterator[None]:
    """The session's Prefect server (its own home and SQLite database in a temp dir) as
    this process's API for every flow run of the session: the server the tests of real
    workers and served deployments use, so a test process starts one server, not two."""
    with prefect.settings.temporary_settings(updates={prefect.settings.PREFECT_API_URL: prefect_server_api}):
        # also the process-global settings, as Prefect's own test harness does, for code
        # running in a context copied before this fixture
        with prefect.context._temporary_global_settings_context(prefect.context.get_settings_context()):
            yield
            # logs and events still queued reach the server before it stops
            APILogWorker.drain_all()
            EventsWorker.drain_all()


#: a namespace the sandbox's user is not a member of
UNKNOWN_NAMESPACE = "00000000-not-a-namespace"
#: a namespace an earlier sync loaded that the sandbox's user-info no longer lists
LOST_NAMESPACE = "11111111-access-lost"


@dataclass(frozen=True)
class SharedRun:
    """A flow run that several tests read (they change nothing of it)."""

    state: State
    #: its `warehouse` and `reports_dir`
    paths: dict[str, str]
    #: the API requests it made
    requests: int


def _shared_run(sandbox: SandboxServer, folder: Path, prepare: Callable[[Path], None] | None = None,
                **parameters: Any) -> SharedRun:
    """The flow on `sandbox` into a fresh warehouse in `folder` (made ready by `prepare`,
    if given), with the sandbox's login in env vars."""
    paths = {"warehouse": str(folder / "warehouse.duckdb"), "reports_dir": str(folder / "reports")}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(EMAIL_ENV, DEFAULT_EMAIL)
        patch.setenv(PASSWORD_ENV, DEFAULT_PASSWORD)
        patch.delenv("SOURCES__COMPANY_CONNECTIONS__ACCESS_TOKEN", raising=False)
        if prepare is not None:
            prepare(Path(paths["warehouse"]))
        before = requests_answered(sandbox)
        state = company_connections_sync(base_url=sandbox.base_url, **paths, **parameters,
                                         return_state=True)
    return SharedRun(state=state, paths=paths, requests=requests_answered(sandbox) - before)


@pytest.fixture(scope="session")
def default_run(prefect_harness: None, shared_sandbox: SandboxServer,
                tmp_path_factory: pytest.TempPathFactory) -> SharedRun:
    """A run with the default parameters: a full read of the sandbox. The sandbox
    answers after 20 ms, long enough for the namespaces' fetches to be seen side by side."""
    shared_sandbox.faults.latency_ms = 20
    try:
        return _shared_run(shared_sandbox, tmp_path_factory.mktemp("default-run"))
    finally:
        shared_sandbox.faults.latency_ms = 0


@pytest.fixture(scope="session")
def lost_namespace_run(prefect_harness: None, shared_sandbox: SandboxServer,
                       tmp_path_factory: pytest.TempPathFactory) -> SharedRun:
    """A run with the default namespaces on a warehouse where an earlier sync loaded the
    sandbox's first namespace and :data:`LOST_NAMESPACE` (which user-info does not list)."""

    def synced_before(warehouse: Path) -> None:
        run_sync(warehouse, source_settings(base_url=shared_sandbox.base_url,
                                            namespaces=[shared_sandbox.world.namespaces[0]]))
        with duckdb.connect(str(warehouse)) as con:
            con.execute("insert into raw.sync_runs select * replace (? as namespace_company_id) "
                        "from raw.sync_runs limit 1", [LOST_NAMESPACE])

    return _shared_run(shared_sandbox, tmp_path_factory.mktemp("lost-namespace-run"), synced_before,
                       export_formats=["csv"])


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flow's sync task retried at once, not after 30 s and 120 s; and each request
    tried once, so that a namespace the sandbox fails fails quickly."""
    monkeypatch.setattr(flow_module, "sync_namespaces",
                        flow_module.sync_namespaces.with_options(retry_delay_seconds=0))
    monkeypatch.setenv("SOURCES__COMPANY_CONNECTIONS__MAX_ATTEMPTS", "1")


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The sandbox's login, given the dlt way: env vars, never flow parameters."""
    monkeypatch.setenv(EMAIL_ENV, DEFAULT_EMAIL)
    monkeypatch.setenv(PASSWORD_ENV, DEFAULT_PASSWORD)
    monkeypatch.delenv("SOURCES__COMPANY_CONNECTIONS__ACCESS_TOKEN", raising=False)
    return {"email": DEFAULT_EMAIL, "password": DEFAULT_PASSWORD}


@pytest.fixture
def paths(tmp_path: Path) -> dict[str, str]:
    """Flow parameters putting the warehouse and the reports into the test's folder."""
    return {
        "warehouse": str(tmp_path / "warehouse.duckdb"),
        "reports_dir": str(tmp_path / "reports"),
    }


class RunReader:
    """Reads what a flow run left in the Prefect API.

    Every filter, sort, limit and offset is given: Prefect 3.8's server rejects an
    explicit null for them under FastAPI >= 0.151, and the client sends null for
    whatever is left out.
    """

    def artifacts(self, flow_run_id: UUID) -> list[Artifact]:
        with get_client(sync_client=True) as client:
            return client.read_artifacts(
                artifact_filter=ArtifactFilter(
                    flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id])
                ),
                flow_run_filter=FlowRunFilter(),
                task_run_filter=TaskRunFilter(),
                sort=ArtifactSort.CREATED_DESC,
                limit=READ_LIMIT,
                offset=0,
            )

    def task_runs(self, flow_run_id: UUID) -> list[TaskRun]:
        with get_client(sync_client=True) as client:
            return client.read_task_runs(
                flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[flow_run_id])),
                task_run_filter=TaskRunFilter(),
                sort=TaskRunSort.EXPECTED_START_TIME_ASC,
                limit=READ_LIMIT,
                offset=0,
            )

    def log_text(self, flow_run_id: UUID) -> str:
        APILogHandler().flush()  # logs are sent in batches: send what is queued first
        with get_client(sync_client=True) as client:
            logs = client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])),
                limit=READ_LIMIT,
                offset=0,
            )
        return "\n".join(log.message for log in logs)


@pytest.fixture
def runs(prefect_harness: None) -> RunReader:
    return RunReader()
