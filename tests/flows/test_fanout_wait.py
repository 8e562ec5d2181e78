"""The fan-out waits for its namespace runs through Prefect (the server's events of each
run's state), not by polling them itself: it returns once every run is final."""

from __future__ import annotations

import threading
import time

import pytest
from prefect import flow, get_client
from prefect.states import Completed, Failed, Pending, Running
from prefect.utilities.asyncutils import run_coro_as_sync

import flows.fanout as fanout

pytestmark = pytest.mark.usefixtures("prefect_harness")

#: seconds after which the runs end
ENDED_AFTER = 2.0


@flow
def namespace_stand_in() -> None:
    """A flow whose runs this test creates and ends itself."""


def test_the_fanout_waits_until_every_run_is_final() -> None:
    with get_client(sync_client=True) as client:
        runs = [client.create_flow_run(namespace_stand_in, state=Pending()) for _ in range(2)]

    def end_runs() -> None:
        """End both runs a while after the fan-out began to wait for them."""
        time.sleep(ENDED_AFTER)
        with get_client(sync_client=True) as client:
            for run, final in zip(runs, (Completed(), Failed(message="namespace x not loaded")), strict=True):
                client.set_flow_run_state(run.id, Running())
                client.set_flow_run_state(run.id, final)

    ender = threading.Thread(target=end_runs)
    started = time.monotonic()
    ender.start()
    try:
        finished = run_coro_as_sync(fanout._finished_runs([run.id for run in runs]))
    finally:
        ender.join()
    assert time.monotonic() - started >= ENDED_AFTER  # it waited for them
    assert finished is not None
    assert [run.id for run in finished] == [run.id for run in runs]
    assert finished[0].state is not None and finished[0].state.is_completed()
    assert finished[1].state is not None and finished[1].state.is_failed()
    assert finished[1].state.message == "namespace x not loaded"
