"""Work for the building process of the tests of :mod:`diligence.analytics.aside`:
importable by name in a spawned interpreter, as the product's own work is."""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import os
import signal
import time
from pathlib import Path
from typing import Any

from diligence.errors import ModelError

log = logging.getLogger("diligence.analytics")


def fail(location: Any, **options: Any) -> None:
    """Tell something, then fail as a model does, with the path the build wrote."""
    log.warning("building in process %d", os.getpid())
    error = ModelError("answers", "Binder Error: column x not found", Path("run/answers.sql"))
    error.path = Path("/warehouse/folder")
    raise error


def die(location: Any, **options: Any) -> None:
    """End as the kernel ends a process out of memory."""
    os.kill(os.getpid(), signal.SIGKILL)


def wait(location: Any, **options: Any) -> None:
    """Build for as long as a test needs (longer than any of them runs)."""
    time.sleep(600)


def linger(location: Any, **options: Any) -> str:
    """Answer, then take long to exit, as a process with dbt loaded does, holding a lock
    of multiprocessing's (dbt's locks start its resource tracker)."""
    lock = multiprocessing.get_context("spawn").Lock()
    atexit.register(time.sleep, 600)
    return f"built, holding {type(lock).__name__}"
