"""The sandbox the CLI tests run against: one per test module (small, the tests' password)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sandbox.server import SandboxServer

from .helpers import SECRET


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(scale="small", password=SECRET) as sandbox:
        yield sandbox
