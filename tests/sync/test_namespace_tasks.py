"""The task plumbing of a namespace's read: work refused by a failing namespace."""

from __future__ import annotations

import asyncio
import inspect
from types import SimpleNamespace

import pytest

from pipelines.company_connections.extract import _NamespaceReader


async def _fail() -> None:
    raise ValueError("the namespace fails")


async def _template_read() -> None:
    raise AssertionError("never started")


def test_work_refused_by_a_failing_namespace_is_closed_not_left_unawaited() -> None:
    """A read that starts while its namespace's task group shuts down (another read
    failed) spawns a template read: the group refuses it, and the coroutine is closed,
    so that no "coroutine ... was never awaited" warning follows the failure."""
    refused = _template_read()

    async def namespace() -> None:
        async with asyncio.TaskGroup() as tasks:
            reader = SimpleNamespace(_tasks=tasks)
            tasks.create_task(_fail())
            try:
                await asyncio.sleep(5)
            except asyncio.CancelledError:  # the group aborts on the failure
                with pytest.raises(RuntimeError, match="shutting down"):
                    _NamespaceReader._spawn(reader, refused)  # type: ignore[arg-type]
                raise

    with pytest.raises(ExceptionGroup):
        asyncio.run(namespace())
    assert inspect.getcoroutinestate(refused) == inspect.CORO_CLOSED
