"""Fixtures shared by the test folders."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.server import SandboxServer


@pytest.fixture
def sandbox() -> Iterator[SandboxServer]:
    """A fresh small sandbox per test (tests change its data and faults)."""
    with SandboxServer(scale="small") as server:
        yield server


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    return tmp_path / "warehouse.duckdb"
