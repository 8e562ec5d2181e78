"""Fixtures of the hostile-store tests: a small sandbox and a history of two syncs to
tamper with, copied for each test beside an `outside/` folder the attacks aim at."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.server import SandboxServer
from tests.cli.helpers import SECRET
from tests.evidence.test_verify import change_an_answer
from tests.helpers import copy_warehouse, settings_for


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(scale="small", password=SECRET) as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def history(server: SandboxServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two syncs of the small sandbox with an answer changed between them."""
    from diligence.sync import run_sync

    warehouse = tmp_path_factory.mktemp("hostile") / "w.duckdb"
    settings = settings_for(server, password=SECRET)
    assert not run_sync(warehouse, settings).failed
    ns = server.world.namespaces[0]
    company, company_type = next((c, t) for c, t in server.world.readable_pairs(ns) if c != ns)
    change_an_answer(server, company, company_type)
    assert not run_sync(warehouse, settings).failed
    return warehouse


@pytest.fixture
def warehouse(history: Path, tmp_path: Path) -> Path:
    """A copy of the history in `tmp_path/store/`, beside an `outside/` folder the
    attacks aim at."""
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "victim").write_text("precious")
    return copy_warehouse(history, tmp_path / "store" / "w.duckdb")
