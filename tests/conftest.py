"""Fixtures shared by the test folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.server import SandboxServer
from tests.helpers import sync


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

