"""`diligence migrate-warehouse`: convert a warehouse file written by DuckDB 2.0 to the
storage this release reads (:mod:`diligence.warehouse.migrate` does the work)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..warehouse import DEFAULT_WAREHOUSE
from ..warehouse.migrate import migrate_warehouse as migrate
from .base import app, handle_errors, out

__all__ = ["migrate_warehouse"]


@app.command("migrate-warehouse")
@handle_errors
def migrate_warehouse(
    warehouse: Annotated[
        Path, typer.Option("--warehouse", "-w", help="DuckDB file to convert.")
    ] = DEFAULT_WAREHOUSE,
    duckdb2_python: Annotated[
        str | None,
        typer.Option(help="A Python with duckdb==2.0.0 (default: uv's isolated environment)."),
    ] = None,
) -> None:
    """Convert a warehouse file written by DuckDB 2.0 (earlier releases) to the storage
    this release reads; the original is kept as <name>.duckdb2.bak."""
    result = migrate(warehouse, python=duckdb2_python)
    if not result.migrated:
        out.print(f"{warehouse} is already readable: nothing to do", highlight=False)
        return
    out.print(
        f"converted {warehouse} ({len(result.row_counts)} tables, "
        f"{sum(result.row_counts.values())} rows, counts verified) in {result.seconds:.1f}s; "
        f"the original is kept as {result.backup}",
        highlight=False,
    )
