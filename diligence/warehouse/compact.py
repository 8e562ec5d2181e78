"""Keep a warehouse file the size of its data: written anew once a quarter of it is free.

DuckDB writes what changed into new blocks and frees the old ones at a checkpoint.
Later writes reuse free blocks, but the file never shrinks (only free blocks at its very
end are cut off), and blocks that changed tables leave half-filled stay half-filled.
Every model build rewrites the current-state marts, so after a few daily syncs about a
quarter of the small sandbox's file is free and the rest partly filled: measured over
twelve syncs, a file of 98 blocks whose data fits in 61.

:func:`compact_if_wasteful` rewrites the file when its free blocks reach
:data:`COMPACT_AT_FREE_SHARE` of it (the analysts' copy follows the same rule, see
:mod:`diligence.analytics.publish`). DuckDB has no in-place compaction (``VACUUM``
does not reclaim space); ``COPY FROM DATABASE`` into a new file is its documented way:

1. the file is checkpointed (what its WAL held goes into it, so no WAL is left behind
   that the new file would not match) and its blocks counted;
2. a new file beside it (``.<name>.<token>.compacting``, made with the configured file
   mode) receives every schema, table, view, constraint and comment;
3. both are compared: the same catalog and, table for table, the same row count. Any
   difference keeps the old file and removes the new one;
4. the new file atomically replaces the old (the real file when the warehouse path is a
   link, so the link keeps pointing at it). A reader that had the old file open reads
   it to the end undisturbed; the next one opens the new file.

The caller holds the writer lock and no session of the file (the model step, after its
build). Compaction is upkeep, never the step's outcome: a file that cannot be rewritten
(no space, a reader holding it) stays as it is, with a warning, and the next build
tries again. A lake has no file to rewrite: DuckLake keeps its Parquet files itself.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import duckdb

from ..errors import WarehouseBusyError
from .access import connect_file
from .filemodes import protect
from .paths import compacting_path, wal_of
from .sql import sql_identifier, sql_string

__all__ = ["COMPACT_AT_FREE_SHARE", "Compaction", "compact_if_wasteful", "free_share"]

log = logging.getLogger(__name__)

#: A file whose free blocks are at least this share of its blocks is written anew.
COMPACT_AT_FREE_SHARE = 0.25
#: What must be the same in both files: every table (and its comment), view, column of
#: either (type, default, nullability, comment) and constraint, by schema and name. Not a
#: view's SQL text: DuckDB writes it anew from the parsed view, and an ``EXCLUDE`` list
#: may come out in another order.
_CATALOG_SQL = """
select 'table', schema_name, table_name, coalesce(comment, '') from duckdb_tables() where database_name = {db}
union all select 'view', schema_name, view_name, '' from duckdb_views() where database_name = {db} and not internal
union all select 'column', schema_name, table_name || '.' || column_name,
    concat_ws('|', data_type, column_default, is_nullable, comment) from duckdb_columns() where database_name = {db}
union all select 'constraint', schema_name, table_name, constraint_type || ' ' || constraint_text
    from duckdb_constraints() where database_name = {db}
order by all
"""


@dataclass(frozen=True)
class Compaction:
    """A file written anew: its size before and after, and how long it took."""

    bytes_before: int
    bytes_after: int
    seconds: float


def free_share(con: duckdb.DuckDBPyConnection, database: str) -> float:
    """The share of `database`'s blocks that are free (0 for an empty file)."""
    total, free = con.execute(
        "select total_blocks, free_blocks from pragma_database_size() where database_name = ?", [database]
    ).fetchone()  # type: ignore[misc]
    return free / total if total else 0.0


def compact_if_wasteful(warehouse: Path, share: float = COMPACT_AT_FREE_SHARE) -> Compaction | None:
    """Write `warehouse` anew when at least `share` of its blocks are free (see the module
    docstring); None when it was not (too little free, or it could not be rewritten)."""
    path = Path(warehouse).expanduser().resolve()
    if not path.is_file():
        return None
    started = time.monotonic()
    before = path.stat().st_size
    temporary = compacting_path(path, uuid.uuid4().hex)
    try:
        con = connect_file(path)
    except (duckdb.Error, WarehouseBusyError) as exc:  # e.g. a reader opened it since the step began
        log.warning("not compacting %s: %s", path.name, exc)
        return None
    finished = False
    try:
        database = con.execute("select current_database()").fetchone()[0]  # type: ignore[index]
        con.execute("checkpoint")
        if free_share(con, database) < share:
            return None
        new = f"{database}_compacted"  # the new file's alias: never the file's own name
        con.execute(f"attach {sql_string(str(temporary))} as {sql_identifier(new)}")
        con.execute(f"copy from database {sql_identifier(database)} to {sql_identifier(new)}")
        con.execute(f"checkpoint {sql_identifier(new)}")
        difference = _difference(con, database, new)
        con.execute(f"detach {sql_identifier(new)}")
        if difference:
            log.warning("not compacting %s: the new file differs (%s); the old one is kept", path.name, difference)
            return None
        finished = not wal_of(temporary).exists()
    except duckdb.Error as exc:  # e.g. no space left for the new file
        log.warning("not compacting %s: %s", path.name, exc)
        return None
    finally:
        con.close()
        if finished:
            _replace(temporary, path)
        else:
            for leftover in (temporary, wal_of(temporary)):
                leftover.unlink(missing_ok=True)
    done = Compaction(before, path.stat().st_size, round(time.monotonic() - started, 2))
    log.info("compacted the warehouse %s: %.1f -> %.1f MB in %.1f s", path.name,
             done.bytes_before / 1e6, done.bytes_after / 1e6, done.seconds)
    return done


def _replace(temporary: Path, path: Path) -> None:
    """Put the finished `temporary` in place of `path`, with the file mode, and make the
    rename durable."""
    protect(temporary)
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def _difference(con: duckdb.DuckDBPyConnection, old: str, new: str) -> str:
    """What differs between the two attached databases' catalogs and row counts ("" when
    nothing does)."""
    catalogs = [con.execute(_CATALOG_SQL.format(db=sql_string(db))).fetchall() for db in (old, new)]
    if catalogs[0] != catalogs[1]:
        missing = sorted(set(catalogs[0]) ^ set(catalogs[1]))
        return f"catalog: {missing[0][0]} {missing[0][1]}.{missing[0][2]}" if missing else "catalog order"
    tables = [(schema, name) for kind, schema, name, _ in catalogs[0] if kind == "table"]
    if not tables:
        return ""
    counts = " union all ".join(
        f"select {sql_string(f'{schema}.{name}')}, "
        f"(select count(*) from {sql_identifier(old)}.{sql_identifier(schema)}.{sql_identifier(name)}), "
        f"(select count(*) from {sql_identifier(new)}.{sql_identifier(schema)}.{sql_identifier(name)})"
        for schema, name in tables
    )
    for table, rows_old, rows_new in con.execute(counts).fetchall():
        if rows_old != rows_new:
            return f"{table}: {rows_old} rows, copied {rows_new}"
    return ""
