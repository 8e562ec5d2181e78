"""What every command of the `diligence` CLI shares: the Typer app and its global options,
the consoles, the warehouse options, exit codes, and :func:`handle_errors`, which turns
expected failures into one line on stderr and an exit code.

The commands live in the ``commands_*`` modules of :mod:`diligence.cli` (sync, models,
export, status, ...), :mod:`diligence.cli.changes` and :mod:`diligence.cli.evidence`
(verify, evidence, replay); each registers on :data:`app` when :mod:`diligence.cli`
imports it.
"""

from __future__ import annotations

import functools
import shlex
import traceback
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any, TypeVar

import click
import typer
from rich.markup import escape
from typer.core import TyperGroup

from pipelines.secrets import redact

from ..config import DEMO_WAREHOUSE
from ..errors import (
    CommandError,
    DiligenceError,
    WarehouseNotReadyError,
    disk_full_line,
    raised_on_purpose,
)
from ..logs import LazySecrets, configure_logging
from ..memory import bound_process_memory
from ..safe_text import terminal_text
from ..warehouse import DEFAULT_WAREHOUSE, Warehouse, open_warehouse
from .consoles import make_console
from .credentials_input import read_password_stdin
from .hints import hint_for

F = TypeVar("F", bound=Callable[..., Any])

#: The order of ``diligence --help``: the trunk (read the service, build, look, hand out,
#: prove), then the rest in the order they are registered.
HELP_ORDER = ("sync", "models", "check", "status", "changes", "export", "report", "verify", "evidence",
              "replay")


class _TrunkFirst(TyperGroup):
    """Lists the commands in :data:`HELP_ORDER`, then the others."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = super().list_commands(ctx)
        return [*(n for n in HELP_ORDER if n in names), *(n for n in names if n not in HELP_ORDER)]


app = typer.Typer(
    cls=_TrunkFirst,
    name="diligence",
    help=(
        "Bring counterparties' companies, connections, questionnaires and documents into a "
        "DuckDB warehouse, build the analytics models and export reports."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # help text is plain: "[evidence] path" stays as written
    context_settings={"help_option_names": ["-h", "--help"]},
)
out = make_console()
err = make_console(stderr=True)
_state: dict[str, Any] = {"debug": False, "verbosity": 0, "secrets": ()}

WarehouseOption = Annotated[
    str | None,
    typer.Option(
        "--warehouse", "-w", envvar="DILIGENCE_WAREHOUSE", show_default=False,
        help="DuckDB file of the warehouse (default: config [warehouse] location, else "
        f"{DEFAULT_WAREHOUSE}), or a DuckLake: ducklake:postgres:<conninfo>.",
    ),
]
AsOfOption = Annotated[
    str | None,
    typer.Option(
        "--as-of", show_default=False,
        help="As the warehouse knew it at this UTC timestamp (e.g. 2026-06-30T23:59:59): the register "
        "as of that date, built aside from analytics.",
    ),
]
DataPathOption = Annotated[
    str | None,
    typer.Option(
        "--data-path", envvar="DILIGENCE_DATA_PATH", show_default=False,
        help="A DuckLake's Parquet files: a directory or s3://... (config [warehouse] data_path).",
    ),
]

BaseUrlOption = Annotated[
    str | None, typer.Option("--base-url", help="Service URL (default: dlt config base_url).")
]
NamespacesOption = Annotated[
    list[str] | None,
    typer.Option("--namespace", "-n",
                 help="Company ID of a namespace; repeat for several (default: all)."),
]



def out_option(help: str) -> Any:
    """The `--out`/`-o` option of a command that writes a file or folder."""
    return typer.Option("--out", "-o", help=help)


# Exit codes (CONTRACT.md: 0 on success, non-zero on failure), all in `handle_errors`,
# one per kind of error whatever the command: our errors carry theirs (`exit_code`:
# EXIT_USAGE when the command cannot run as given, a bad option or a warehouse not ready
# for it yet; EXIT_FAILED when the work failed); the client's (SourceError, see
# diligence.errors) are EXIT_FAILED; each prints its message. Anything else is a bug:
# EXIT_FAILED, its class name and a hint to run with --debug.
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


EvidenceOption = Annotated[
    str | None,
    typer.Option(
        "--evidence", envvar="DILIGENCE_EVIDENCE", show_default=False,
        help="The evidence store: responses and manifests, a folder or s3://bucket/prefix/ (default: config [evidence] path, else "
        "beside the warehouse: data/warehouse.duckdb -> data/warehouse.evidence).",
    ),
]


def _warehouse(location: str | None, data_path: str | None, evidence: str | None = None) -> Warehouse:
    """The Warehouse of the options/env/config; one clear line when unusable."""
    return open_warehouse(location, data_path, evidence=evidence)


def _require_data(owner: Warehouse, *, writing: bool = False) -> None:
    if writing and owner.is_lake:  # one clear line before anything is written
        from ..warehouse.lake import (
            check_location,  # start-up (DuckDB 0.13 s of imports): the lake module loads DuckDB
        )

        check_location(owner.location)
    if not owner.exists():
        raise _no_warehouse(owner)


def _no_warehouse(owner: Warehouse) -> WarehouseNotReadyError:
    hint = ""
    if owner.path == DEFAULT_WAREHOUSE and DEMO_WAREHOUSE.exists():
        hint = f" (`diligence demo` wrote {DEMO_WAREHOUSE}: pass --warehouse {DEMO_WAREHOUSE})"
    return WarehouseNotReadyError(f"no warehouse at {owner.display()}; run `{command_for(owner, 'sync')}` first{hint}")


def command_for(owner: Warehouse, command: str) -> str:
    """`diligence <command>` for the warehouse the user gave (its --warehouse, and a
    lake's --data-path, unless they are the defaults), for a hint to copy."""
    words = ["diligence", command]
    if owner.path is None or owner.path != DEFAULT_WAREHOUSE:
        words += ["--warehouse", owner.display()]
    data_path = getattr(owner.location, "data_path", None) if owner.path is None else None
    if data_path:
        words += ["--data-path", str(data_path)]
    return shlex.join(words)


def _quiet() -> bool:
    return bool(_state["verbosity"] < 0)


def _say(message: str) -> None:
    """A progress line on stdout, left out with --quiet."""
    if not _quiet():
        out.print(message, highlight=False)


def _password_from_stdin(asked: bool) -> str | None:
    """The password from stdin when `asked` (else None); masked in every log line from now."""
    if not asked:
        return None
    try:
        password = read_password_stdin()
    except ValueError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
    _state["secrets"].add(password)
    return password


def _configured_secrets() -> list[str | None]:
    """Configured secret values, so that logs can mask them wherever they appear."""
    from pipelines.company_connections.credentials import (  # start-up (dlt 0.9 s of imports): dlt
        CREDENTIALS,
        configured_secret,
    )

    return [configured_secret(key) for key in CREDENTIALS]


def handle_errors(func: F) -> F:
    """Turn expected failures into one line on stderr and an exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        # looked up when a line is first masked: an `export` or `report` that masks nothing
        # never imports the source package for it
        _state["secrets"] = LazySecrets(_configured_secrets)
        configure_logging(debug=_state["debug"], secrets=_state["secrets"], verbosity=_state["verbosity"])

        def error_line(text: str, caret: str | None = None) -> None:
            # one line whatever its length; [..] in it is text, not markup. A failed
            # model's SQL line and the caret under it follow as they are.
            if caret:
                text = text.removesuffix(caret)
            line = " ".join(redact(text, _state["secrets"]).split())
            err.print(f"[red]error:[/red] {escape(terminal_text(line))}", highlight=False)
            for below in (caret or "").splitlines():
                err.print(escape(terminal_text(redact(below, _state["secrets"]))), highlight=False)

        try:
            return func(*args, **kwargs)
        except typer.Exit:
            raise
        except CommandError as exc:
            full = disk_full_line(exc)  # e.g. every namespace failed on a full disk
            error_line(full or str(exc))
            raise typer.Exit(EXIT_FAILED if full else exc.exit_code) from None
        except KeyboardInterrupt:
            err.print("interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except Exception as exc:
            if _state["debug"]:  # the traceback, then the same line and exit code as without
                for text in "".join(traceback.format_exception(exc)).splitlines():
                    err.print(escape(terminal_text(redact(text, _state["secrets"]))), highlight=False)
            full = disk_full_line(exc)  # said as such, whatever step the full disk stopped
            hint = full or hint_for(exc)
            known = hint is not None or raised_on_purpose(exc)
            text = hint or (str(exc) if known else f"{type(exc).__name__}: {exc}")
            error_line(text, None if hint else getattr(exc, "caret", None))
            if not known and not _state["debug"]:
                err.print("run with --debug for the traceback", style="dim", highlight=False)
            code = exc.exit_code if isinstance(exc, DiligenceError) and full is None else EXIT_FAILED
            raise typer.Exit(code) from None

    return wrapper  # type: ignore[return-value]


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version  # only --version reads the package metadata

        out.print(f"diligence {version('diligence-warehouse')}", highlight=False)
        raise typer.Exit()


@app.callback()
def main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks and debug logs.")] = False,
    show_version: Annotated[bool, typer.Option(
        "--version", help="Print the version and exit.", callback=_print_version,
        is_eager=True)] = False,
    quiet: Annotated[bool, typer.Option(
        "--quiet", "-q", help="Print only errors and one final line.")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", "-v", help="Log each namespace's progress and our debug lines (never secrets).")] = False,
) -> None:
    """diligence-warehouse: sync, model, export, schedule."""
    if quiet and verbose:
        err.print("[red]error:[/red] --quiet and --verbose exclude each other", highlight=False)
        raise typer.Exit(EXIT_USAGE)
    _state["debug"] = debug
    _state["verbosity"] = -1 if quiet else 1 if verbose else 0
    bound_process_memory()  # before any thread exists


#: an --as-of this close to now counts as now (clock skew, "now" typed by a script)
_AS_OF_SLACK = timedelta(minutes=5)


def _parse_as_of(value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(
            f"--as-of {value!r} is not a timestamp; use e.g. 2026-01-31 or 2026-01-31T06:00:00",
            EXIT_USAGE,
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


