"""Fixtures shared by the test folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.server import SandboxServer
from tests.helpers import sync
from tests.processes import prefect_server


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first: those marked `duration(seconds)` from the longest down,
    then the other `slow` ones, then the rest, each file's order kept. `make test`'s
    workers take whole files in this order, so no long file is left to end the run alone."""
    weight: dict[Path, float] = {}
    for item in items:
        duration = item.get_closest_marker("duration")
        guess = float(duration.args[0]) if duration else 1.0 if item.get_closest_marker("slow") else 0.0
        weight[item.path] = max(weight.get(item.path, 0.0), guess)
    items.sort(key=lambda item: -weight[item.path])


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
