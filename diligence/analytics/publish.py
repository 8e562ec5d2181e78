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

The copy follows the build, not the history. The history tables grow with every sync,
so copying them whole would make every publish cost the whole history; instead the new
copy starts as a byte copy of the previous one (the kernel copies the file) and takes,
of each history table, only the rows the build changed: when the previous copy holds
the build before this one (the warehouse's spare ``<name>__build``, see
:mod:`.incremental`), the rows after that build's watermark (the project's macro
``rows_after_watermark``) and those of companies renamed since replace the copy's rows
of the same key. Every other table, and every history table of any other copy, is
copied whole. Which build each table of the copy holds is kept in the warehouse
(``staging.analysts_copy``) with the copy file's identity (size and modification time):
a copy written by anyone else is copied whole again. A copy whose
free blocks reach a quarter of it is written anew (compacted).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path

import duckdb

from ..warehouse import published_path
from ..warehouse.compact import COMPACT_AT_FREE_SHARE, free_share
from ..warehouse.filemodes import protect
from ..warehouse.paths import publishing_path, wal_of
from ..warehouse.sql import sql_identifier, sql_string, transaction
from .dbt import render_macros
from .incremental import Built, HistoryTable, built_tables
from .models import BUILD_SUFFIX, copy_comments

#: Which build each history table of the analysts' copy holds, and the copy's identity.
COPY_STATE_TABLE = "staging.analysts_copy"


def publish_analytics(
    warehouse: Path, con: duckdb.DuckDBPyConnection, history: Mapping[str, HistoryTable] | None = None
) -> Path:
    """Copy the `analytics` schema of `warehouse` into its published read-only file.

    `con` is the step's open session of `warehouse` (see ``Warehouse.session``); the
    copy is attached to it, written, and detached again. `history`: the incremental
    models' tables (:func:`.incremental.history_tables`), taken over from the previous
    copy as far as it holds the build before (see the module docstring); without it
    every table is copied whole."""
    target = published_path(warehouse)
    temporary = publishing_path(warehouse, uuid.uuid4().hex)
    try:
        source = con.execute("select current_database()").fetchone()[0]  # type: ignore[index]
        # not the spares of the incremental models (`<name>__build`, the next build's)
        tables = [
            row[0]
            for row in con.execute(
                "select table_name from information_schema.tables where table_catalog = "
                f"{sql_string(source)} and table_schema = 'analytics' "
                "and table_type = 'BASE TABLE' order by 1"  # no bound parameter: see copy_comments
            ).fetchall()
            if not row[0].endswith(BUILD_SUFFIX)
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
        built = built_tables(con)
        kept = _kept_from_copy(con, target, history or {}, built)
        if kept:
            shutil.copyfile(target, temporary)  # the kernel copies it (copy_file_range)
        # DuckDB 1.5 takes no bound parameter in ATTACH: a quoted literal instead
        con.execute(f"attach {sql_string(str(temporary))} as published")
        try:
            changed = _changed_rows(con, source, {table: ((history or {})[table], watermarks)
                                                  for table, watermarks in kept.items() if watermarks is not None})
            if kept:
                # what the copy does not keep goes first, and a checkpoint frees its blocks
                # before anything is written: the new rows reuse them, and the copy stays
                # the size of its data
                with transaction(con):
                    _drop_others(con, set(kept))
                    for table, rows in changed.items():
                        on = " and ".join(f"changed.{sql_identifier(c)} = copied.{sql_identifier(c)}"
                                          for c in (history or {})[table].unique_key)
                        con.execute(f"delete from published.analytics.{sql_identifier(table)} as copied "
                                    f"using {rows} as changed where {on}")
                con.execute("checkpoint published")
            # one transaction: one commit into the copy, not one per table and comment
            # (0.36 s instead of 0.49 s for the sandbox's 15 tables and 362 comments)
            with transaction(con):
                con.execute("create schema if not exists published.analytics")
                for table in tables:
                    copied = f"published.analytics.{sql_identifier(table)}"
                    if table in changed:
                        con.execute(f"insert into {copied} select * from {changed[table]}")
                    elif table not in kept:
                        con.execute(f"create table {copied} as "
                                    f"select * from {sql_identifier(source)}.analytics.{sql_identifier(table)}")
                con.execute("use published")
                try:
                    for view in views:
                        con.execute(view)
                finally:
                    con.execute(f"use {sql_identifier(source)}")
                copy_comments(con, source, "published")  # analysts see the descriptions too
            for relation in changed.values():
                con.execute(f"drop table {relation}")
        finally:
            con.execute("detach published")
    except BaseException:
        for leftover in (temporary, wal_of(temporary)):
            leftover.unlink(missing_ok=True)
        raise
    protect(temporary)  # analysts' copy: owner-only (or group) before it is visible
    os.replace(temporary, target)
    _record_copy(con, target, {name: built[name] for name in history or {} if name in built and name in tables})
    return target


def _kept_from_copy(
    con: duckdb.DuckDBPyConnection, target: Path, history: Mapping[str, HistoryTable], built: Mapping[str, Built]
) -> dict[str, dict[str, str] | None]:
    """The history tables the new copy takes over from the previous one: name -> the
    watermarks after which the build changed rows (None: the copy already holds this
    build). Empty when the copy is to be written anew."""
    if not history or not target.exists() or _free_share(con, target) >= COMPACT_AT_FREE_SHARE:
        return {}
    recorded = _recorded_copy(con, _identity(target))
    kept: dict[str, dict[str, str] | None] = {}
    for name in history:
        published, spare, holds = built.get(name), built.get(name + BUILD_SUFFIX), recorded.get(name)
        if published is None or holds is None:
            continue
        if holds == published.built_at:
            kept[name] = None
        elif spare is not None and holds == spare.built_at and spare.fingerprint == published.fingerprint:
            kept[name] = spare.watermarks
    return kept


def _changed_rows(
    con: duckdb.DuckDBPyConnection, source: str, tables: Mapping[str, tuple[HistoryTable, dict[str, str]]]
) -> dict[str, str]:
    """For each of `tables` (name -> its spec and the build before's watermarks), a
    temporary table of the rows whose key the build changed: its rows after those
    watermarks, and those of companies renamed since; returns their names by table. The
    project's macros give the SQL, all in one dbt invocation."""
    named = {row[0] for row in con.execute(  # the tables with a company_name column
        "select table_name from duckdb_columns() where database_name = "
        f"{sql_string(source)} and schema_name = 'analytics' and column_name = 'company_name'").fetchall()}
    relations = {table: f"{sql_identifier(source)}.analytics.{sql_identifier(table)}" for table in tables}
    calls = []
    for table, (spec, watermarks) in tables.items():
        calls.append(("rows_after_watermark", (relations[table], watermarks, list(spec.boundaries))))
        if table in named:
            calls.append(("is_after_watermark", (watermarks, ["name_changed_at"])))
    rendered = iter(render_macros(calls, target="build"))  # in the order of `calls`
    names: dict[str, str] = {}
    for table in tables:
        changed = next(rendered)
        if table in named:
            changed += (f"\nunion\nselect * from {relations[table]} semi join (select namespace_company_id, "
                        f"company_id from {sql_identifier(source)}.staging.stg_company_names "
                        f"where {next(rendered)}) using (namespace_company_id, company_id)")
        names[table] = sql_identifier(f"changed_{table}")
        con.execute(f"create or replace temporary table {names[table]} as {changed}")
    return names


def _drop_others(con: duckdb.DuckDBPyConnection, kept_tables: set[str]) -> None:
    """In the copy: drop its views (made again) and every table but `kept_tables`."""
    for name, kind in con.execute(
        "select table_name, 'table' from duckdb_tables() where database_name = 'published' "
        "and schema_name = 'analytics' union all select view_name, 'view' from duckdb_views() "
        "where database_name = 'published' and schema_name = 'analytics'"
    ).fetchall():
        if kind == "view" or name not in kept_tables:
            con.execute(f"drop {kind} published.analytics.{sql_identifier(name)}")


def _free_share(con: duckdb.DuckDBPyConnection, target: Path) -> float:
    """The share of the copy's blocks that are free (1.0 when it cannot be read; 0 for
    an empty file)."""
    try:
        con.execute(f"attach {sql_string(str(target))} as previous_copy (read_only)")
    except duckdb.Error:
        return 1.0
    try:
        return free_share(con, "previous_copy")
    finally:
        con.execute("detach previous_copy")


def _identity(path: Path) -> str:
    """The copy file's size and modification time: any write changes them."""
    stat = path.stat()
    return f"{stat.st_size}:{stat.st_mtime_ns}"


def _recorded_copy(con: duckdb.DuckDBPyConnection, identity: str) -> dict[str, object]:
    """The build each history table of the copy `identity` holds (none for another copy)."""
    exists = con.execute(
        "select count(*) from duckdb_tables() where database_name = current_database() "
        "and schema_name = 'staging' and table_name = 'analysts_copy'").fetchone()[0]  # type: ignore[index]
    if not exists:
        return {}
    return dict(con.execute(
        f"select relation, built_at from {COPY_STATE_TABLE} where copy_identity = {sql_string(identity)}"
    ).fetchall())


def _record_copy(con: duckdb.DuckDBPyConnection, target: Path, holds: Mapping[str, Built]) -> None:
    """Keep which build each history table of the new copy holds, with its identity."""
    identity = _identity(target)
    with transaction(con):
        con.execute("create schema if not exists staging")
        con.execute(f"create table if not exists {COPY_STATE_TABLE} "
                    "(relation varchar, built_at timestamptz, copy_identity varchar)")
        con.execute(f"delete from {COPY_STATE_TABLE}")
        for name, built in holds.items():  # literals: see copy_comments
            con.execute(f"insert into {COPY_STATE_TABLE} values ({sql_string(name)}, "
                        f"cast({sql_string(built.built_at.isoformat())} as timestamptz), {sql_string(identity)})")
