"""The commands of the built-in sandbox: `sandbox` serves it, `sandbox change` changes a
running one's data, `demo` runs the whole job on it.

`diligence sandbox` takes the sandbox's own options: the server and its data, declared
here, and one option per fault switch, made from the fields of
:class:`sandbox.faults.Faults` (their defaults and help), so a new fault switch is an
option of ``diligence sandbox`` and of ``python -m sandbox`` at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import typing
from datetime import date
from pathlib import Path
from typing import Annotated, Any

import typer

from ..config import DEMO_WAREHOUSE
from ..errors import CommandError
from .base import EXIT_USAGE, BaseUrlOption, app, err, handle_errors, out, out_option

__all__ = ["demo", "sandbox", "sandbox_change"]

_SANDBOX_HELP = """Serve the built-in emulator of the service on 127.0.0.1 until Ctrl+C.

It implements every endpoint and rule of the service's specification with deterministic
data, and fault switches for testing. Admin routes under /_sandbox/ expose the ground
truth (/_sandbox/truth) and change faults at run time; `diligence sandbox change`
changes its data (answers, documents, connections) while it runs.
"""

sandbox_app = typer.Typer(name="sandbox", help=_SANDBOX_HELP, invoke_without_command=True,
                          context_settings={"help_option_names": ["-h", "--help"]})
app.add_typer(sandbox_app)


def _serve(ctx: typer.Context, **options: Any) -> None:
    if ctx.invoked_subcommand is not None:
        return
    # start-up (uvicorn 0.1 s of imports): the sandbox's server (uvicorn) loads for `diligence sandbox` only
    from sandbox.__main__ import serve_kwargs
    from sandbox.server import serve

    try:
        today = date.fromisoformat(options["today"]) if options["today"] else None
        kwargs = serve_kwargs(argparse.Namespace(**{**options, "today": today}))
    except ValueError as exc:  # a date, a size or a fault switch out of range
        raise CommandError(str(exc), EXIT_USAGE) from None
    serve(**kwargs)


def _option(name: str, kind: Any, default: Any, help_text: str, *flags: str) -> inspect.Parameter:
    flag = "--" + name.replace("_", "-")
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind, typer.Option(flag, *flags, help=help_text)])


def _serve_parameters() -> list[inspect.Parameter]:
    """The options of `diligence sandbox`: the server and its data, then the fault switches."""
    from sandbox.data import SCALES
    from sandbox.faults import Faults
    from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, DEFAULT_PORT

    declared = [
        _option("port", int, DEFAULT_PORT, "Port (0: any free port)."),
        _option("host", str, "127.0.0.1", "Interface to bind."),
        _option("scale", str, "small", f"Data size: {', '.join(SCALES)}."),
        _option("connections", int | None, None, "The scale's namespaces list N connections in all."),
        _option("seed", int, 7, "Data seed."),
        _option("drift", bool, False, "Add unknown field types, extra properties and missing expiry dates."),
        _option("hostile", bool, False, "Serve hostile counterparty text (formulas, escapes, HTML, traversal "
                "names), an oversize document and a too deeply nested answer."),
        _option("today", str | None, None, "Anchor date of document expiries (YYYY-MM-DD, default today UTC)."),
        _option("email", str, DEFAULT_EMAIL, "Account e-mail."),
        _option("password", str, DEFAULT_PASSWORD, "Account password."),
        _option("page_size", int | None, None, "Paginate endpoints 5 and 10 with a Link header."),
        _option("url_ttl_seconds", float, 60.0, "Lifetime of signed download URLs (s).", "--url-ttl"),
        _option("renew_expired", bool, False, "Let endpoint 2 renew expired tokens."),
    ]
    hints = typing.get_type_hints(Faults)
    scalar = (bool, int, float, int | None, float | None)
    switches = [_option(f.name, hints[f.name], f.default, str(f.metadata.get("help", "")).capitalize() + ".")
                for f in dataclasses.fields(Faults) if hints[f.name] in scalar]
    context = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
    return [context, *declared, *switches]


_serve.__signature__ = inspect.Signature(_serve_parameters())  # type: ignore[attr-defined]
_serve.__annotations__ = {p.name: p.annotation for p in _serve.__signature__.parameters.values()}  # type: ignore[attr-defined]
sandbox = sandbox_app.callback(invoke_without_command=True)(handle_errors(_serve))


@sandbox_app.command("change")
@handle_errors
def sandbox_change(
    base_url: BaseUrlOption = None,
    answers: Annotated[int, typer.Option("--answers", min=0, max=1000, help="Answers to revise.")] = 3,
    documents: Annotated[int, typer.Option(
        "--documents", min=0, max=1000, help="Documents to renew for a year, or to make expire in 7 days.")] = 2,
    connections: Annotated[int, typer.Option("--connections", min=0, max=1000, help="Connections to end.")] = 1,
    template_field: Annotated[bool, typer.Option(
        "--template-field", help="Add a question to a company type's questionnaire.")] = False,
    key: Annotated[str | None, typer.Option(
        "--key", help="Make the company endpoint send a new key of this name.", show_default=False)] = None,
) -> None:
    """Change the data of a running sandbox as counterparties would between two syncs:
    revise answers, renew or shorten documents, end connections, add a question, send a
    new key. Sync again, then `diligence changes` shows them."""
    import httpx

    from ..config import configured

    url = (base_url or str(configured("sources.company_connections.base_url") or "")).rstrip("/")
    if not url:
        raise CommandError("no sandbox to change: give --base-url (the URL `diligence sandbox` serves)", EXIT_USAGE)
    body = {"answers": answers, "documents": documents, "connections": connections,
            "template_field": template_field, **({"key": key} if key else {})}
    try:
        answer = httpx.post(f"{url}/_sandbox/change", json=body, timeout=30)
    except httpx.HTTPError as exc:
        raise CommandError(f"cannot reach the sandbox at {url}: {exc}") from None
    if answer.status_code != 200:
        raise CommandError(f"the sandbox at {url} did not change: HTTP {answer.status_code} {answer.text[:200]}")
    for line in answer.json().get("changed", []):
        out.print(line, highlight=False)
    out.print(f"sync again to see them: diligence sync --base-url {url}, then diligence changes", highlight=False)


@app.command()
@handle_errors
def demo(
    scale: Annotated[str, typer.Option(help="Sandbox data size: small, medium or large.")] = "small",
    warehouse: Annotated[Path, typer.Option("--warehouse", "-w", help="Warehouse of the demo.")] = DEMO_WAREHOUSE,
    out_dir: Annotated[Path | None, out_option(
        "Write the reports exactly into this folder, replacing an earlier export there "
        "(default: a new folder per run under reports/, named by reports/latest).")] = None,
) -> None:
    """The whole job on the built-in sandbox: sandbox + sync + models + checks + export.

    Starts the sandbox on a free port, syncs every namespace into WAREHOUSE, builds
    the analytics schema, writes CSV and Parquet reports and the HTML report into a new
    folder under reports/ (or OUT) and prints a summary.
    """
    from .demo import (
        run_demo,  # start-up (the sandbox 0.1 s of imports): the sandbox and the pipeline load for the demo only
    )

    summary = run_demo(scale=scale, warehouse=warehouse, out_dir=out_dir, console=out, progress_console=err)
    out.print(summary)
