"""``python -m sandbox``: run the sandbox in the foreground (e.g. as a subprocess).

The fault flags are generated from :class:`sandbox.faults.Faults`
(``latency_ms`` -> ``--latency-ms``), so the dataclass is the single source of
truth; :func:`add_arguments` and :func:`serve_kwargs` let another CLI expose
and forward the same options.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Sequence
from datetime import date
from typing import Any

from sandbox.data import SCALES
from sandbox.faults import Faults
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, DEFAULT_PORT, serve

# Short spellings accepted besides the generated ones.
_ALIASES = {"url_ttl_seconds": ["--url-ttl"]}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _flag_fields() -> list[dataclasses.Field[Any]]:
    """Fault switches with a scalar value (the list switches are Python/admin only)."""
    hints = typing.get_type_hints(Faults)
    scalar = (bool, int, float, int | None, float | None)
    return [f for f in dataclasses.fields(Faults) if hints[f.name] in scalar]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the sandbox's options (server, data, and one flag per fault switch)."""
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (0 = any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind")
    parser.add_argument("--scale", choices=list(SCALES), default="small", help="data size")
    parser.add_argument("--connections", type=int, default=None, metavar="N",
                        help="the scale's namespaces list N connections in all (default: the scale's)")
    parser.add_argument("--seed", type=int, default=7, help="data seed")
    parser.add_argument("--drift", action="store_true",
                        help="add unknown field types, extra properties and missing expiry dates")
    parser.add_argument("--hostile", action="store_true",
                        help="serve hostile counterparty text (formulas, escapes, HTML, traversal "
                             "names), an oversize document and a too deeply nested answer")
    parser.add_argument("--today", type=date.fromisoformat, default=None,
                        help="anchor date of document expiries (YYYY-MM-DD, default today UTC)")
    parser.add_argument("--email", default=DEFAULT_EMAIL, help="account e-mail")
    parser.add_argument("--password", default=DEFAULT_PASSWORD, help="account password")
    parser.add_argument("--page-size", type=int, default=None,
                        help="paginate endpoints 5 and 10 with a Link header (default off)")
    parser.add_argument("--url-ttl-seconds", *_ALIASES["url_ttl_seconds"], type=float, default=60,
                        dest="url_ttl_seconds", help="lifetime of signed download URLs (s)")
    parser.add_argument("--renew-expired", action="store_true",
                        help="let endpoint 2 renew expired tokens")
    hints = typing.get_type_hints(Faults)
    for f in _flag_fields():
        hint = hints[f.name]
        help_text = f.metadata.get("help", "")
        if hint is bool:
            parser.add_argument(_flag(f.name), action="store_true", dest=f.name, help=help_text)
        else:
            kind = int if hint in (int, int | None) else float
            parser.add_argument(_flag(f.name), type=kind, default=f.default, dest=f.name,
                                help=help_text)


def faults_from_args(args: argparse.Namespace) -> Faults:
    """A :class:`Faults` from parsed arguments (validated like the admin route)."""
    faults = Faults()
    faults.update({f.name: getattr(args, f.name) for f in _flag_fields()})
    return faults


def _connections(scale: str, connections: int | None) -> int | None:
    """`connections` once checked against the scale (ValueError: too few)."""
    if connections is not None:
        SCALES[scale].with_connections(connections)
    return connections


def serve_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments for :func:`sandbox.server.serve` from parsed arguments."""
    return {
        "port": args.port, "host": args.host, "scale": args.scale,
        "connections": _connections(args.scale, args.connections), "seed": args.seed,
        "drift": args.drift, "hostile": args.hostile, "today": args.today, "email": args.email,
        "password": args.password, "page_size": args.page_size,
        "url_ttl_seconds": args.url_ttl_seconds, "renew_expired": args.renew_expired,
        "faults": faults_from_args(args),
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Parse ``argv`` and serve until interrupted."""
    parser = argparse.ArgumentParser(prog="python -m sandbox",
                                     description="Run the local stand-in of the service.")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        kwargs = serve_kwargs(args)
    except ValueError as exc:
        parser.error(str(exc))
    serve(**kwargs)


if __name__ == "__main__":
    main()
