"""`run_coroutine`, the synchronous way into the async client: a signal stops it, and the
call sees the caller's context.

Prefect cancels a flow run with SIGTERM, whose handler raises ``TerminationSignal`` (a
``BaseException``) in the main thread. On a uvloop loop running there, uvloop logged that
exception and went on with the call (the user-info request of ``resolve-namespaces``),
so a cancelled run lived until Prefect killed it 30 s later.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from pipelines.company_connections import run_coroutine
from pipelines.company_connections.limits import request_priority


class Terminated(BaseException):
    """What Prefect's SIGTERM handler raises in a flow run (``TerminationSignal``)."""


@pytest.fixture
def sigterm_raises() -> Iterator[None]:
    def handler(signum: int, frame: object) -> None:
        raise Terminated

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_signal_stops_the_call_and_is_raised_in_the_caller(sigterm_raises: None) -> None:
    cancelled = threading.Event()

    async def request() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM))
    started = time.monotonic()
    timer.start()
    with pytest.raises(Terminated):
        run_coroutine(request())
    assert time.monotonic() - started < 5
    assert cancelled.is_set()


def test_the_call_sees_the_callers_context_and_returns_its_result() -> None:
    async def priority() -> int:
        return request_priority.get()

    token = request_priority.set(7)
    try:
        assert run_coroutine(priority()) == 7
    finally:
        request_priority.reset(token)


def test_a_call_from_inside_a_running_loop() -> None:
    async def outer() -> int:
        return run_coroutine(asyncio.sleep(0, result=3))

    assert asyncio.run(outer()) == 3
