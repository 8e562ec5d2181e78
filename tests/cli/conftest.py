"""The sandbox the CLI tests run against: one per test module (small, the tests' password);
and one warehouse synced by `diligence sync` for the whole package, which each module that
reads a synced warehouse copies instead of syncing again."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox.server import SandboxServer

from .helpers import CREDENTIALS, SECRET, SyncedFolder, run


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(scale="small", password=SECRET) as sandbox:
        yield sandbox


@pytest.fixture(scope="package")
def synced_folder(tmp_path_factory: pytest.TempPathFactory) -> SyncedFolder:
    """One full `diligence sync` (models included) for every CLI module that only needs a
    synced warehouse; a module that changes it works on its own copy."""
    folder = tmp_path_factory.mktemp("cli-synced")
    with SandboxServer(scale="small", password=SECRET) as sandbox:
        result = run(
            ["sync", "--base-url", sandbox.base_url, "-w", "w.duckdb", "--json-summary", "run.json"],
            folder, CREDENTIALS,
        )
    assert result.returncode == 0, result.stderr
    return SyncedFolder(folder, result, sandbox.base_url)
