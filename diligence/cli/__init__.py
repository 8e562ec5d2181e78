"""The `diligence` command line: thin wrappers over the steps the Prefect flow runs too.

Every command that writes the warehouse goes through :mod:`diligence.steps`. The
`schedule` command needs the Prefect flow, so it is added from above, by the entry
module :mod:`entry` (``diligence`` and ``python -m diligence`` run that one):
nothing in ``diligence/`` imports ``flows/``. Module-level imports stay light
(typer, rich, the standard library); each command imports what it needs when it runs.

Errors are one or a few clear lines on stderr and a non-zero exit code; pass
``--debug`` (before the command) for a traceback. Secrets never reach the output.
Off a terminal nothing is wrapped or truncated (:mod:`diligence.cli.consoles`).
``--quiet`` prints errors and one final line; ``--verbose`` logs our debug lines.

This package only assembles the command::

    base               the Typer app, global options, shared options, exit codes, handle_errors
    output             what a pipeline run prints (namespaces, models, downloads, waits)
    commands_sync      sync, check, models            (read the service, build the warehouse)
    commands_read      dbt-profile, docs, export, status, report    (read the warehouse)
    commands_sandbox   sandbox, demo                   (the built-in sandbox)
    commands_migrate   migrate-warehouse
    changes            changes
    evidence           verify, evidence [prune], replay

Each command module registers its commands on :data:`app` when imported; the order of
the imports below is the order of ``diligence --help``. The logic of each convenience
lives in its own module (``check``, ``select``, ``summary``, ``status``, ``hints``,
``schedule_check``, ``demo``, ``progress``); the commands only parse, call and print.
"""

from __future__ import annotations

from ..errors import CommandError
from .base import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, app, err, handle_errors, main, out

# Registration order is the order of `diligence --help`: keep these imports as they are.
# isort: off
from . import changes as _changes  # noqa: F401 - registers changes
from . import evidence as _evidence  # noqa: F401 - registers verify, evidence, replay
from . import commands_sync as _commands_sync  # noqa: F401 - registers sync, check, models
from . import commands_read as _commands_read  # noqa: F401 - registers dbt-profile ... report
from . import commands_sandbox as _commands_sandbox  # noqa: F401 - registers sandbox, demo
from . import commands_migrate as _commands_migrate  # noqa: F401 - registers migrate-warehouse
# isort: on

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_USAGE",
    "CommandError",
    "app",
    "err",
    "handle_errors",
    "main",
    "out",
]
