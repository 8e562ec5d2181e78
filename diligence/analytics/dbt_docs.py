"""dbt's docs site and source freshness for the warehouse in use.

:func:`generate_docs` writes the site (every model, column, test and source with the
lineage graph) as one self-contained HTML file (``dbt docs generate --static``): it opens
from disk, no server and no network. :func:`source_freshness` runs
``dbt source freshness`` on the raw layer with the thresholds of
`sql/models/staging/_sources.yml` (`diligence status --sources`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import DbtError
from ..warehouse.filemodes import protect
from .dbt import describe_failure, invoke, location_of


@dataclass(frozen=True)
class SourceFreshness:
    """How fresh one raw table is, by dbt's rule (max `synced_at` against the thresholds)."""

    table: str
    status: str  # pass, warn, error; "missing" (no such table yet), "empty" (no rows)
    max_loaded_at: datetime | None
    age_seconds: float | None


def generate_docs(warehouse: Any, out_dir: Path) -> Path:
    """Write dbt's docs site for `warehouse` into `out_dir`/index.html; returns its path."""
    with tempfile.TemporaryDirectory(prefix="diligence-docs-") as generated:
        run = invoke(["docs", "generate", "--static"], location_of(warehouse), target="analytics",
                     read_only=True, target_path=Path(generated))
        if not run.success:
            raise DbtError(describe_failure(run, "dbt docs generate"))
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / "index.html"
        temporary = out_dir / f".index.html.{os.getpid()}.tmp"
        shutil.copyfile(Path(generated) / "static_index.html", temporary)
    protect(temporary)
    os.replace(temporary, target)
    return target


def source_freshness(warehouse: Any) -> list[SourceFreshness]:
    """``dbt source freshness`` on every raw table, by table name."""
    run = invoke(["source", "freshness"], location_of(warehouse), target="analytics", read_only=True)
    if run.error is not None:
        raise DbtError(describe_failure(run, "dbt source freshness"))
    tables: list[SourceFreshness] = []
    for item in getattr(run.result, "results", None) or []:
        status = str(getattr(item.status, "value", item.status)).lower()
        max_loaded_at = getattr(item, "max_loaded_at", None)
        age = getattr(item, "age", None)
        if status == "runtime error":
            status, max_loaded_at, age = "missing", None, None
        if max_loaded_at is not None and max_loaded_at.year == 1:  # dbt's stand-in for no rows
            status, max_loaded_at, age = "empty", None, None
        if max_loaded_at is not None and max_loaded_at.tzinfo is None:
            max_loaded_at = max_loaded_at.replace(tzinfo=UTC)
        tables.append(
            SourceFreshness(
                table=item.node.name,
                status=status,
                max_loaded_at=max_loaded_at,
                age_seconds=float(age) if age is not None else None,
            )
        )
    return sorted(tables, key=lambda t: t.table)
