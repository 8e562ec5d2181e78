"""SQL text for statements that take no bound parameters (DuckDB's ``ATTACH``,
``COPY ... TO``, ``COMMENT ON``, catalog queries kept free of parameters) and for
names that come from data (tables, columns, catalogs); :func:`table_names`, what a
connection's catalog holds; and :func:`transaction`, the one way a block of statements
commits whole or not at all."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["sql_identifier", "sql_string", "table_names", "transaction"]


def sql_string(text: str) -> str:
    """`text` as a SQL string literal: in single quotes, each quote doubled."""
    return "'" + text.replace("'", "''") + "'"


def sql_identifier(name: str) -> str:
    """`name` as a quoted SQL identifier: in double quotes, each double quote doubled."""
    return '"' + name.replace('"', '""') + '"'


@contextlib.contextmanager
def transaction(con: Any) -> Iterator[None]:
    """The block's statements in one transaction of `con` (a DuckDB connection):
    committed at its end, rolled back if it raises, whatever it raises (a DuckDB
    connection's own context manager closes it instead)."""
    import duckdb  # start-up (DuckDB 0.13 s of imports): DuckDB loads with the first statement, not with this module

    con.execute("begin transaction")
    try:
        yield
        con.execute("commit")
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # no transaction left to roll back
            con.execute("rollback")
        raise


def table_names(con: Any) -> set[str]:
    """Every table and view of an open DuckDB connection, as ``schema.name``."""
    return {
        f"{schema}.{name}"
        for schema, name in con.execute(
            "select table_schema, table_name from information_schema.tables"
        ).fetchall()
    }
