"""First on the PYTHONPATH of the stop tests' runners: every Python process they start
writes the stacks of all its threads to ``$STACKS_DIR/<pid>.txt`` on SIGUSR1, and goes on
running (`tests/schedule/test_stop.py` asks for them when a stop hangs). A file, not
stderr: a Prefect worker's flow-run process writes stderr into the worker, which may be
the process that hangs."""

import faulthandler
import os
import signal

if folder := os.environ.get("STACKS_DIR"):
    _out = open(os.path.join(folder, f"{os.getpid()}.txt"), "w")  # noqa: SIM115 - for the process's life
    faulthandler.register(signal.SIGUSR1, file=_out, all_threads=True)
