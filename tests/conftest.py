"""Fixtures shared by the test folders, and how `make test` spreads them over its workers."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.server import SandboxServer
from tests.helpers import TODAY, made_once, sync
from tests.processes import prefect_server

#: Test folders whose tests share package- or session-scoped fixtures that cost seconds of
#: CPU each time a worker makes them: the CLI's synced folder, the report's synced and
#: reported warehouse, the lake's PostgreSQL cluster, the flows' Prefect server. Under
#: `make test` (``--dist loadgroup``) each of these folders runs in one worker; every
#: other test file is a group of its own, as ``loadfile``.
WHOLE_FOLDERS = ("tests/cli", "tests/flows", "tests/lake", "tests/report")
#: The group of every test that uses the session's Prefect server (`prefect_server_api`),
#: whatever its folder (the lake's fan-out too): one server for the run, not one in each
#: worker that meets such a test (a server costs about 20 CPU s over a run; the lake's
#: PostgreSQL cluster, then made in that worker too, about 1).
PREFECT_SERVER_GROUP = "tests/flows"


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        folder = path.rsplit("/", 1)[0]
        if "prefect_server_api" in item.fixturenames:
            group = PREFECT_SERVER_GROUP
        else:
            group = folder if folder in WHOLE_FOLDERS else path
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture
def sandbox() -> Iterator[SandboxServer]:
    """A fresh small sandbox per test (tests change its data and faults), the world of
    `synced_small` (the same day, even when the run crosses midnight)."""
    with SandboxServer(scale="small", today=TODAY) as server:
        yield server


@pytest.fixture(scope="session")
def shared_sandbox() -> Iterator[SandboxServer]:
    """One small sandbox for the tests of a worker that only read it (the sandbox's
    contract tests, the flows): the world of `sandbox`, started once. Its users change
    neither its world nor its data; a fault a test sets (latency, failing namespaces) it
    resets before it ends."""
    with SandboxServer(scale="small", today=TODAY) as server:
        yield server


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "warehouse.duckdb"


@pytest.fixture(scope="session")
def synced_small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse synced once for the whole run (:func:`tests.helpers.made_once`) from a
    fresh small sandbox (the world of `sandbox`), raw layer only. Read-only: a test that
    syncs on top of it works on a copy (:func:`tests.helpers.copy_warehouse`) instead of
    syncing again."""

    def synced(folder: Path) -> None:
        with SandboxServer(scale="small", today=TODAY) as server:
            assert not sync(server, folder / "warehouse.duckdb").failed

    folder, _ = made_once(tmp_path_factory, f"synced-small-{TODAY}", synced)
    return folder / "warehouse.duckdb"


@pytest.fixture(scope="session")
def prefect_server_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the session's Prefect server keeps its SQLite database (and WAL) and its log."""
    return tmp_path_factory.mktemp("prefect-server") / "server-home"


@pytest.fixture(scope="session")
def prefect_server_api(prefect_server_home: Path) -> Iterator[str]:
    """One `prefect server start` for the session (its own home and SQLite database in a
    temp dir), for the tests that drive a real server through subprocesses (a served
    deployment, a work pool's workers, a flow run whose files at rest are scanned); each
    uses its own flow, deployment and pool names. Yields the API URL. (A server costs
    about 16 s of CPU to start, 9 of them migrating its new database.)"""
    with prefect_server(prefect_server_home, startup_seconds=120) as api_url:
        yield api_url


#: the tests of this process that use the session's Prefect server and have not ended
_prefect_server_users: set[str] | None = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Stop the session's Prefect server (and what depends on it: the flows' harness
    drains its logs and events first) once the last test of this process that uses it
    has ended, not at the end of the session: under `make test` its group ends minutes
    before the others, and idling through them cost it 16 of its 70 CPU s. A run where
    some of its users went to another worker (not ``--dist loadgroup``) keeps it to the
    end."""
    global _prefect_server_users
    yield
    if _prefect_server_users is None:
        _prefect_server_users = {test.nodeid for test in item.session.items
                                 if "prefect_server_api" in getattr(test, "fixturenames", ())}
    _prefect_server_users.discard(item.nodeid)
    if _prefect_server_users or nextitem is None or "prefect_server_api" not in item.fixturenames:
        return None
    (*_, server) = item._fixtureinfo.name2fixturedefs["prefect_server_api"]  # type: ignore[attr-defined]
    server.finish(item._request)  # type: ignore[attr-defined]
    return None


@pytest.fixture(autouse=True)
def no_temporary_prefect_server() -> Iterator[None]:
    """Fail a test that leaves Prefect's temporary server running in this pytest process.
    A test that needs Prefect's API uses `prefect_server_api`, or runs what it tests in a
    process of its own; with no API configured, Prefect would start a temporary server
    here silently (a few CPU s), keep it idle to the run's end, and under load time out
    starting it."""
    yield
    module = sys.modules.get("prefect.server.api.server")
    if module is None:
        return
    running = [server for server in module.SubprocessASGIServer._instances.values()
               if server.server_process is not None]
    for server in running:
        server.stop()  # the next tests of this process start without it
    assert not running, ("this test started Prefect's temporary server in the pytest process "
                         "(no Prefect API configured): use `prefect_server_api`, or a process of its own")
