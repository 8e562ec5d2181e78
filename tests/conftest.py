"""Fixtures shared by the test folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.server import SandboxServer
from tests.helpers import sync
from tests.processes import prefect_server


@pytest.fixture
def sandbox() -> Iterator[SandboxServer]:
    """A fresh small sandbox per test (tests change its data and faults)."""
    with SandboxServer(scale="small") as server:
        yield server


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "warehouse.duckdb"


@pytest.fixture(scope="session")
def synced_small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse synced once from a fresh small sandbox (the world of `sandbox`), raw
    layer only. Read-only: a test that syncs on top of it works on a copy
    (:func:`tests.helpers.copy_warehouse`) instead of syncing again."""
    warehouse = tmp_path_factory.mktemp("synced-small") / "warehouse.duckdb"
    with SandboxServer(scale="small") as server:
        assert not sync(server, warehouse).failed
    return warehouse


@pytest.fixture(scope="session")
def prefect_server_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One `prefect server start` for the session (its own home and SQLite database in a
    temp dir), for the tests that drive a real server through subprocesses (a served
    deployment, a work pool's workers); each uses its own flow, deployment and pool names.
    Yields the API URL."""
    home = tmp_path_factory.mktemp("prefect-server") / "server-home"
    with prefect_server(home, startup_seconds=120) as api_url:
        yield api_url
