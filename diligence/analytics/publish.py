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

from ..warehouse import published_path
from ..warehouse.filemodes import protect
from ..warehouse.paths import publishing_path, wal_of
from ..warehouse.sql import sql_identifier, sql_string, transaction
from .models import copy_comments


def publish_analytics(warehouse: Path, con: duckdb.DuckDBPyConnection) -> Path:
    """Copy the `analytics` schema of `warehouse` into its published read-only file.

    `con` is the step's open session of `warehouse` (see ``Warehouse.session``); the
    copy is attached to it, written, and detached again."""
    target = published_path(warehouse)
    temporary = publishing_path(warehouse, uuid.uuid4().hex)
    try:
        source = con.execute("select current_database()").fetchone()[0]  # type: ignore[index]
        tables = [
            row[0]
            for row in con.execute(
                "select table_name from information_schema.tables where table_catalog = "
                f"{sql_string(source)} and table_schema = 'analytics' "
                "and table_type = 'BASE TABLE' order by 1"  # no bound parameter: see copy_comments
            ).fetchall()
        ]
        # a view (freshness) is made again from its SQL, which names no catalog: it reads
        # the copy's own tables, and computes when the analysts read it
        views = [
            row[0]
            for row in con.execute(
                "select sql from duckdb_views() where database_name = "
                f"{sql_string(source)} and schema_name = 'analytics' order by view_name"
            ).fetchall()
        ]
        # DuckDB 1.5 takes no bound parameter in ATTACH: a quoted literal instead
        con.execute(f"attach {sql_string(str(temporary))} as published")
        try:
            # one transaction: one commit into the copy, not one per table and comment
            # (0.36 s instead of 0.49 s for the sandbox's 15 tables and 362 comments)
            with transaction(con):
                con.execute("create schema published.analytics")
                for table in tables:
                    con.execute(
                        f"create table published.analytics.{sql_identifier(table)} as "
                        f"select * from {sql_identifier(source)}.analytics.{sql_identifier(table)}"
                    )
                con.execute("use published")
                try:
                    for view in views:
                        con.execute(view)
                finally:
                    con.execute(f"use {sql_identifier(source)}")
                copy_comments(con, source, "published")  # analysts see the descriptions too
        finally:
            con.execute("detach published")
    except BaseException:
        for leftover in (temporary, wal_of(temporary)):
            leftover.unlink(missing_ok=True)
        raise
    protect(temporary)  # analysts' copy: owner-only (or group) before it is visible
    os.replace(temporary, target)
    return target
