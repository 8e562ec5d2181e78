"""SQL text for statements that take no bound parameters (DuckDB's ``ATTACH``,
``COPY ... TO``, ``COMMENT ON``, catalog queries kept free of parameters) and for
names that come from data (tables, columns, catalogs)."""

from __future__ import annotations

__all__ = ["sql_identifier", "sql_string"]


def sql_string(text: str) -> str:
    """`text` as a SQL string literal: in single quotes, each quote doubled."""
    return "'" + text.replace("'", "''") + "'"


def sql_identifier(name: str) -> str:
    """`name` as a quoted SQL identifier: in double quotes, each double quote doubled."""
    return '"' + name.replace('"', '""') + '"'
