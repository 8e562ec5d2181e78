"""Small query helpers for the model tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb


def rows(path: Path, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    """Run a query read-only and return the rows as dicts."""
    with duckdb.connect(str(path), read_only=True) as con:
        result = con.execute(sql, params or [])
        names = [d[0] for d in result.description]
        return [dict(zip(names, row, strict=True)) for row in result.fetchall()]


def by(key: str, records: list[dict[str, Any]]) -> dict[Any, dict[str, Any]]:
    return {record[key]: record for record in records}


def scalar(path: Path, sql: str) -> Any:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(sql).fetchone()[0]
