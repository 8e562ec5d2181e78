"""`diligence changes`: what changed, as a digest per counterparty (or JSON rows).

A thin caller of :mod:`diligence.analytics.digest` over ``analytics.changes``.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ..errors import WarehouseNotReadyError
from ..warehouse import table_names
from .base import (
    DataPathOption,
    WarehouseOption,
    _require_data,
    _warehouse,
    app,
    command_for,
    handle_errors,
    out,
)

__all__ = ["changes"]


@app.command()
@handle_errors
def changes(
    since: Annotated[
        str | None,
        typer.Option("--since", help="Changes after this sync (a sync id) or from this UTC time "
                     "(e.g. 2026-11-01 or 2026-11-01T06:00:00Z); default: the last sync's."),
    ] = None,
    company: Annotated[str | None, typer.Option("--company", help="Only this counterparty's (company ID).")] = None,
    kind: Annotated[
        list[str] | None,
        typer.Option("--kind", help="Only these kinds (repeat, or comma-separated), e.g. answer_changed, "
                     "document_newly_expiring, connection_removed."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list of the change rows.")] = False,
    warehouse: WarehouseOption = None,
    data_path: DataPathOption = None,
) -> None:
    """What changed: answers revised, documents added, changed, removed, newly expiring or
    expired, connections and reading rights, company details, questionnaire template
    fields and keys the service started or stopped sending; grouped by counterparty."""
    from ..analytics.digest import (  # start-up (DuckDB 0.13 s of imports): DuckDB loads when it runs
        parse_kinds,
        read_digest,
    )

    kinds = parse_kinds(kind)
    owner = _warehouse(warehouse, data_path)
    _require_data(owner)
    with owner.session(read_only=True, memory_limit=None) as con:
        if "analytics.changes" not in table_names(con):
            raise WarehouseNotReadyError(
                f"{owner.display()} has no analytics.changes yet; run `{command_for(owner, 'models')}` "
                "(or a sync) first")
        digest = read_digest(con, since=since, company=company, kinds=kinds)
    if as_json:
        out.print(json.dumps([change.row() for change in digest.changes]), highlight=False, markup=False,
                  soft_wrap=True)
        return
    out.print(digest.body(limit=len(digest.changes) or 1), highlight=False, markup=False, soft_wrap=True)
