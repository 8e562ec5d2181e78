"""SQL text for statements that take no bound parameters (DuckDB's ``ATTACH``,
``COPY ... TO``, ``COMMENT ON``, catalog queries kept free of parameters) and for
names that come from data (tables, columns, catalogs); :func:`table_names`, what a
connection's catalog holds; and :func:`transaction`, the one way a block of statements
commits whole or not at all (:func:`aborting_error`: the statement that aborted one)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["aborting_error", "reporting_aborts", "sql_identifier", "sql_string", "table_names", "transaction"]

#: a connection (by id) -> the error of its last failed statement in the open transaction
_last_failure: dict[int, BaseException] = {}
#: a connection (by id) -> the error that aborted its open transaction: every later
#: statement fails with "transaction is aborted", this says why
_aborted: dict[int, BaseException] = {}


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
    _forget(con)
    try:
        yield
        con.execute("commit")
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # no transaction left to roll back
            con.execute("rollback")
        raise
    finally:
        _forget(con)


def _forget(con: Any) -> None:
    _last_failure.pop(id(con), None)
    _aborted.pop(id(con), None)


@contextlib.contextmanager
def reporting_aborts(con: Any) -> Iterator[None]:
    """Statements of `con` in its open :func:`transaction`: one that fails is recorded;
    one that finds the transaction aborted by an earlier failure raises that failure's
    error instead of DuckDB's "transaction is aborted" (a probe that fails leaves the
    transaction sound: only the statement after it tells)."""
    import duckdb  # start-up: see transaction()

    try:
        yield
    except duckdb.TransactionException:
        if id(con) not in _aborted and id(con) in _last_failure:
            _aborted[id(con)] = _last_failure[id(con)]
        first = _aborted.get(id(con))
        if first is not None:
            raise first from None
        raise
    except duckdb.Error as exc:
        _last_failure[id(con)] = exc
        raise


def aborting_error(con: Any) -> BaseException | None:
    """The error that aborted the open :func:`transaction` of `con`, if one did: what a
    step reports, rather than the statements that failed after it."""
    return _aborted.get(id(con))


def table_names(con: Any) -> set[str]:
    """Every table and view of an open DuckDB connection, as ``schema.name``."""
    return {
        f"{schema}.{name}"
        for schema, name in con.execute(
            "select table_schema, table_name from information_schema.tables"
        ).fetchall()
    }
