"""The project's SQL models and checks run unchanged on a lake and give the same
analytics tables as on a DuckDB file, first built and then extended."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import duckdb

from diligence.analytics.checks import failed_checks, run_checks
from diligence.analytics.models import ANALYTICS_SCHEMA, build_models
from diligence.report.export import export_reports
from diligence.warehouse import Warehouse, lake
from diligence.warehouse.location import WarehouseLocation

from ..models.rawdb import SYNCED_AT
from ..models.synthetic import append_sync, append_sync_to, generate_raw

AS_OF = SYNCED_AT + timedelta(days=1)


def _copy_raw_into(con: duckdb.DuckDBPyConnection, source: Path) -> list[str]:
    con.execute(f"attach '{source}' as source_file (read_only)")
    tables = [
        row[0]
        for row in con.execute(
            "select table_name from duckdb_tables() "
            "where database_name = 'source_file' and schema_name = 'raw' order by 1"
        ).fetchall()
    ]
    con.execute("create schema if not exists raw")
    for table in tables:
        con.execute(f"create table raw.{table} as select * from source_file.raw.{table}")
    con.execute("detach source_file")
    return tables


def test_models_and_checks_on_a_lake_equal_a_file_build_and_extend_as_a_full_build(
    lake_location: WarehouseLocation, tmp_path: Path
) -> None:
    """A first build on a lake gives every table, comment and export a file's build gives.
    Then, as on a file, the spares are renamed and extended (delete+insert, the state in
    staging.incremental_state): after a second build and one more sync, the third build
    extends every history table and gives the tables a full build of a file gives."""
    raw = generate_raw(tmp_path / "source.duckdb", 200, 30, 2, 2, 6, churn=0.05)
    file_warehouse = tmp_path / "file.duckdb"
    shutil.copy(raw, file_warehouse)
    file_result = build_models(file_warehouse, as_of=AS_OF)
    assert file_result.checks and not failed_checks(file_result.checks)  # run in the build

    con = lake.connect(lake_location)
    try:
        assert _copy_raw_into(con, raw)
    finally:
        con.close()
    lake_result = build_models(lake_location, as_of=AS_OF)
    assert not failed_checks(run_checks(lake_location))
    assert lake_result.row_counts == file_result.row_counts
    assert lake_result.row_counts["analytics.answers"] > 1000

    # compare every analytics table, row for row, from one connection holding both
    con = lake.connect(lake_location, read_only=True)
    try:
        con.execute(f"attach '{file_warehouse}' as file_wh (read_only)")
        tables = [
            row[0]
            for row in con.execute(
                "select table_name from information_schema.tables "  # tables and views
                "where table_catalog = 'file_wh' and table_schema = ? order by 1",
                [ANALYTICS_SCHEMA],
            ).fetchall()
        ]
        lake_tables = [
            row[0]
            for row in con.execute(
                "select table_name from information_schema.tables "  # tables and views
                "where table_catalog = 'lake' and table_schema = ? order by 1",
                [ANALYTICS_SCHEMA],
            ).fetchall()
        ]
        assert tables == lake_tables and len(tables) == len(file_result.row_counts)
        for table in tables:
            columns = con.execute(
                "select column_name, data_type from duckdb_columns() "
                "where database_name = ? and schema_name = ? and table_name = ? "
                "order by column_index",
                ["file_wh", ANALYTICS_SCHEMA, table],
            ).fetchall()
            assert columns == con.execute(
                "select column_name, data_type from duckdb_columns() "
                "where database_name = ? and schema_name = ? and table_name = ? "
                "order by column_index",
                ["lake", ANALYTICS_SCHEMA, table],
            ).fetchall(), table
            for left, right in (("lake", "file_wh"), ("file_wh", "lake")):
                extra = con.execute(
                    f"select count(*) from (select * from {left}.analytics.{table} "
                    f"except all select * from {right}.analytics.{table})"
                ).fetchone()[0]
                assert extra == 0, f"{table}: {extra} rows in {left} only"
        # the models' table comments reached the lake too
        assert con.execute(
            "select count(*) from duckdb_tables() where database_name = 'lake' "
            "and schema_name = 'analytics' and comment is not null"
        ).fetchone()[0] == con.execute(
            "select count(*) from duckdb_tables() where database_name = 'file_wh' "
            "and schema_name = 'analytics' and comment is not null"
        ).fetchone()[0] > 0
    finally:
        con.close()

    # the exports from the lake are the same files, byte for byte
    con = lake.connect(lake_location, read_only=True)
    try:
        lake_files = export_reports(con, tmp_path / "lake-csv", "csv")
    finally:
        con.close()
    with Warehouse(file_warehouse).session(read_only=True, memory_limit=None) as con:
        file_files = export_reports(con, tmp_path / "file-csv", "csv")
    assert [(f.report, f.rows) for f in lake_files] == [(f.report, f.rows) for f in file_files]
    assert sum(f.rows for f in lake_files) > 1000
    for lake_file, file_file in zip(lake_files, file_files, strict=True):
        assert lake_file.path.read_bytes() == file_file.path.read_bytes(), lake_file.report

    # the history marts extend on a lake as on a file
    build_models(lake_location, as_of=AS_OF)
    con = lake.connect(lake_location)
    try:
        append_sync_to(con, churn=0.05)
    finally:
        con.close()
    extended = build_models(lake_location, as_of=AS_OF)
    assert extended.built_in_full == [] and not failed_checks(extended.checks)

    append_sync(file_warehouse, churn=0.05)
    build_models(file_warehouse, as_of=AS_OF, full_refresh=True)
    con = lake.connect(lake_location, read_only=True)
    try:
        con.execute(f"attach '{file_warehouse}' as file_wh (read_only)")
        for table in ("answer_history", "answer_changes", "document_history", "connection_history", "changes"):
            for left, right in (("lake", "file_wh"), ("file_wh", "lake")):
                extra = con.execute(
                    f"select count(*) from (select * from {left}.analytics.{table} "
                    f"except all select * from {right}.analytics.{table})"
                ).fetchone()[0]
                assert extra == 0, f"{table}: {extra} rows in {left} only"
        assert con.execute("select count(*) from lake.analytics.answer_changes").fetchone()[0] > 100
    finally:
        con.close()
