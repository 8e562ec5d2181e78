"""A signal that stops a flow run is not lost when its handler runs inside a finalizer
(flows.signals): the same signal comes again, and stops the code that was running."""

from __future__ import annotations

import _thread
import importlib
import signal
import sys
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from prefect.exceptions import TerminationSignal
from prefect.utilities.engine import capture_sigterm

import flows
from flows.signals import LostSignals, deliver_lost_signals

#: how long the code after the finalizer waits for the signal to come again
WAIT_SECONDS = 10


class SignalledWhileFinalized:
    """An object whose finalizer receives `signum`: the handler's exception is raised in
    ``__del__``, where Python can only report it to :data:`sys.unraisablehook`."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self) -> None:
        signal.raise_signal(self.signum)  # handled before it returns, inside __del__


@pytest.fixture
def unraisable(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """What reaches the hook behind :class:`LostSignals`, installed for the test."""
    seen: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", LostSignals(seen.append))
    yield seen


def finalized_then_wait(signum: int) -> None:
    """Finalize an object that receives `signum`, then wait for the signal to stop this
    code (the caller expects the wait to be interrupted)."""
    SignalledWhileFinalized(signum)  # collected at once
    time.sleep(WAIT_SECONDS)


def test_sigterm_in_a_finalizer_during_a_flow_run_stops_the_run(unraisable: list[Any]) -> None:
    with capture_sigterm():  # Prefect's SIGTERM handler, as around a flow run
        with pytest.raises(TerminationSignal) as stopped:
            finalized_then_wait(signal.SIGTERM)
    assert stopped.value.signal == signal.SIGTERM
    assert unraisable == [], "the lost TerminationSignal was reported, not delivered again"


def test_sigint_in_a_finalizer_raises_keyboardinterrupt_after_it(unraisable: list[Any]) -> None:
    # Python's own SIGINT handler, whatever this process inherited (a background job's
    # SIGINT is ignored)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            finalized_then_wait(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert unraisable == []


def test_other_exceptions_of_finalizers_go_to_the_previous_hook(unraisable: list[Any]) -> None:
    class Failing:
        def __del__(self) -> None:
            raise ValueError("in a finalizer")

    Failing()
    assert [type(report.exc_value) for report in unraisable] == [ValueError]


def test_importing_flows_installs_it_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)
    importlib.reload(flows)  # what the import of the package does in a run's process
    installed = sys.unraisablehook
    assert isinstance(installed, LostSignals)
    assert installed.previous is sys.__unraisablehook__
    deliver_lost_signals()
    assert sys.unraisablehook is installed


def test_while_the_interpreter_shuts_down_the_hook_stays_quiet(
    unraisable: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_thread(*args: Any) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    monkeypatch.setattr(_thread, "start_new_thread", no_thread)
    # what the hook reads of sys.UnraisableHookArgs (which Python alone constructs)
    sys.unraisablehook(SimpleNamespace(exc_value=TerminationSignal(signal.SIGTERM)))  # raises nothing
    assert unraisable == []
