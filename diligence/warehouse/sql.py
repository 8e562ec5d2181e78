"""SQL text for statements that take no bound parameters (DuckDB's ``ATTACH``,
``COPY ... TO``, ``COMMENT ON``, catalog queries kept free of parameters)."""

from __future__ import annotations

__all__ = ["sql_string"]


def sql_string(text: str) -> str:
    """`text` as a SQL string literal: in single quotes, each quote doubled."""
    return "'" + text.replace("'", "''") + "'"
