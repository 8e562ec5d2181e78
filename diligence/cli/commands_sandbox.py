"""The commands of the built-in sandbox: `sandbox` serves it, `demo` runs the whole job on it.

`diligence sandbox` has no options of its own: it hands its arguments to the sandbox's
own parser (:func:`sandbox.__main__.add_arguments`, one flag per field of
:class:`sandbox.faults.Faults`), so ``diligence sandbox --help`` and ``python -m sandbox
--help`` list the same options, and a new fault switch is a flag of both at once.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from ..config import DEMO_WAREHOUSE
from ..errors import CommandError
from .base import EXIT_USAGE, app, err, handle_errors, out, out_option

__all__ = ["demo", "sandbox"]

_SANDBOX_HELP = """Serve the built-in emulator of the service on 127.0.0.1 until Ctrl+C.

It implements every endpoint and rule of the service's specification with
deterministic data, and fault switches for testing. Admin routes under
/_sandbox/ expose the ground truth (/_sandbox/truth) and change faults at run time.
"""


class _SandboxHelp(argparse.RawDescriptionHelpFormatter):
    """The sandbox's own help, headed `Usage:` as every other command's, its description's
    paragraphs as written."""

    def add_usage(
        self, usage: str | None, actions: Iterable[argparse.Action], groups: Iterable[Any],
        prefix: str | None = None,
    ) -> None:
        super().add_usage(usage, actions, groups, "Usage: " if prefix is None else prefix)


class _SandboxParser(argparse.ArgumentParser):
    """The sandbox's parser, whose errors are the CLI's: one line, exit code 2."""

    def error(self, message: str) -> NoReturn:
        raise CommandError(message, EXIT_USAGE)


@app.command(
    help=_SANDBOX_HELP,
    add_help_option=False,  # -h/--help go to the sandbox's parser, which lists its options
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
@handle_errors
def sandbox(ctx: typer.Context) -> None:
    # start-up (uvicorn 0.1 s of imports): the sandbox's server (uvicorn) loads for `diligence sandbox` only
    from sandbox.__main__ import add_arguments, serve_kwargs
    from sandbox.server import serve

    parser = _SandboxParser(prog="diligence sandbox", usage="%(prog)s [OPTIONS]",
                            description=_SANDBOX_HELP, formatter_class=_SandboxHelp)
    add_arguments(parser)
    args = parser.parse_args(ctx.args)  # -h/--help: the sandbox's options, exit 0
    try:
        kwargs = serve_kwargs(args)
    except ValueError as exc:  # a fault switch out of range
        raise CommandError(str(exc), EXIT_USAGE) from None
    serve(**kwargs)


@app.command()
@handle_errors
def demo(
    scale: Annotated[str, typer.Option(help="Sandbox data size: small, medium or large.")] = "small",
    warehouse: Annotated[Path, typer.Option("--warehouse", "-w", help="Warehouse of the demo.")] = DEMO_WAREHOUSE,
    out_dir: Annotated[Path, out_option("Folder for the reports.")] = Path("reports"),
) -> None:
    """The whole job on the built-in sandbox: sandbox + sync + models + checks + export.

    Starts the sandbox on a free port, syncs every namespace into WAREHOUSE, builds
    the analytics schema, writes CSV and Parquet reports into OUT and prints a summary.
    """
    from .demo import (
        run_demo,  # start-up (the sandbox 0.1 s of imports): the sandbox and the pipeline load for the demo only
    )

    summary = run_demo(scale=scale, warehouse=warehouse, out_dir=out_dir, console=out, progress_console=err)
    out.print(summary)
