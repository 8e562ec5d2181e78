"""A signal that stops a flow run is never lost in a finalizer.

Prefect stops a run by a signal to its process: SIGTERM, which Prefect's handler turns
into :class:`~prefect.exceptions.TerminationSignal` while a flow runs, or SIGINT
(:class:`KeyboardInterrupt`). Python runs a signal's handler in the main thread between
two instructions; when those belong to a finalizer (a ``__del__`` or a weakref callback,
which the garbage collector may run at any point of any code), the exception cannot
leave it. Python prints "Exception ignored in ..." and the run goes on as if it had never
been signalled, until its runner kills it: `diligence schedule` stopped by SIGTERM then
takes 30 s instead of half a second, and the run's own clean-up never happens.

:func:`deliver_lost_signals` hands such an exception to :class:`LostSignals`, which sends
the same signal again, to be handled once the finalizer has returned.
"""

from __future__ import annotations

import _thread
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

from prefect.exceptions import TerminationSignal

__all__ = ["LostSignals", "deliver_lost_signals", "signal_of"]


def signal_of(exception: BaseException | None) -> int | None:
    """The signal whose handler raised `exception`, or None for any other exception."""
    if isinstance(exception, TerminationSignal):
        return exception.signal
    if isinstance(exception, KeyboardInterrupt):
        return signal.SIGINT
    return None


class LostSignals:
    """A :data:`sys.unraisablehook`: the exception of a signal's handler that a finalizer
    swallowed becomes the same signal again; every other exception goes to `previous`."""

    def __init__(self, previous: Callable[[Any], object]) -> None:
        self.previous = previous

    def __call__(self, unraisable: Any) -> None:  # sys.UnraisableHookArgs
        signum = signal_of(unraisable.exc_value)
        if signum is None:
            self.previous(unraisable)
            return
        # Sent from a new thread that this one does not wait for (threading.Thread.start()
        # waits, and the signal would then be handled, and lost again, inside this hook):
        # the main thread handles it after this hook and the finalizer have returned. Were
        # it to land in another finalizer, it comes back here and is sent once more. While
        # the interpreter shuts down no thread starts (RuntimeError): the process is ending.
        with contextlib.suppress(RuntimeError):
            _thread.start_new_thread(os.kill, (os.getpid(), signum))


def deliver_lost_signals() -> None:
    """Install :class:`LostSignals` as this process's :data:`sys.unraisablehook`, in front
    of the hook in place. Once per process: a second call changes nothing."""
    if not isinstance(sys.unraisablehook, LostSignals):
        sys.unraisablehook = LostSignals(sys.unraisablehook)
