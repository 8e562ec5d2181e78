"""Sharing one warehouse between the schedule and analysts.

DuckDB lets one process write a database file, and while it writes no other process
may open that file, not even read-only. So:

* Analysts query the **published copy** ``<warehouse>-analytics.duckdb`` (for
  ``data/warehouse.duckdb``: ``data/warehouse-analytics.duckdb``): after every model
  build the `analytics` schema is copied into a new file which then atomically
  replaces the old one. A session that has the old copy open keeps reading it
  undisturbed (the old file lives on until it closes); new sessions see the new build.
  A sync therefore never locks analysts out, and an analyst never blocks a sync.
* A process that holds the warehouse file itself open blocks writers: a sync or a
  model build then waits up to ``--wait`` seconds for it and otherwise stops with a
  message naming the process, before anything is read or written
  (:func:`diligence.warehouse.wait_until_writable`).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import duckdb

from .filemodes import protect
from .models import copy_comments
from .warehouse import published_path


def publish_analytics(warehouse: Path, con: duckdb.DuckDBPyConnection | None = None) -> Path:
    """Copy the `analytics` schema of `warehouse` into its published read-only file.

    `con` is the step's open connection to `warehouse` (see ``Warehouse.session``);
    without one the file is attached read-only on a connection of its own."""
    target = published_path(warehouse)
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    owned = con is None
    session = duckdb.connect() if con is None else con
    try:
        if owned:
            # DuckDB 1.5 takes no bound parameter in ATTACH: a quoted literal instead
            session.execute(f"attach {_sql_string(str(warehouse))} as source (read_only)")
            source = "source"
        else:
            source = session.execute("select current_database()").fetchone()[0]  # type: ignore[index]
        tables = [
            row[0]
            for row in session.execute(
                "select table_name from information_schema.tables where table_catalog = ? "
                "and table_schema = 'analytics' and table_type = 'BASE TABLE' order by 1",
                [source],
            ).fetchall()
        ]
        session.execute(f"attach {_sql_string(str(temporary))} as published")
        try:
            session.execute("create schema published.analytics")
            for table in tables:
                session.execute(
                    f'create table published.analytics."{table}" as '
                    f'select * from "{source}".analytics."{table}"'
                )
            copy_comments(session, source, "published")  # analysts see the descriptions too
        finally:
            session.execute("detach published")
        if owned:
            session.execute("detach source")
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    finally:
        if owned:
            session.close()
    protect(temporary)  # analysts' copy: owner-only (or group) before it is visible
    os.replace(temporary, target)
    return target


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
