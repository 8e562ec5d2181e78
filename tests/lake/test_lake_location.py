"""Parsing and checking a warehouse location: one-line errors, never a password."""

from __future__ import annotations

from pathlib import Path

import pytest

from diligence.errors import WarehouseLocationError, redact
from diligence.warehouse import lake, lake_pipeline
from diligence.warehouse.location import parse_location
from tests.processes import free_port

from .postgres import PostgresCluster

SECRET = "s3cr3t-Pa55"


def _error(location: str, data_path: str | Path | None = None) -> str:
    with pytest.raises(WarehouseLocationError) as info:
        parse_location(location, data_path)
    message = str(info.value)
    assert "\n" not in message
    assert SECRET not in message and SECRET not in repr(info.value)
    assert info.value.transient is False
    return message


def test_a_duckdb_path_is_a_file_warehouse(tmp_path: Path) -> None:
    location = parse_location(str(tmp_path / "w.duckdb"))
    assert not location.is_lake
    assert location.path == tmp_path / "w.duckdb"
    assert parse_location(tmp_path / "w.duckdb") == location


def test_a_lake_uri_with_a_data_path(tmp_path: Path) -> None:
    location = parse_location(
        f"ducklake:postgres:dbname=lake host=db.internal user=loader password={SECRET}",
        tmp_path / "data",
    )
    assert location.is_lake
    assert location.data_path == str(tmp_path / "data") + "/"
    assert SECRET in location.uri  # what ATTACH needs...
    assert SECRET not in repr(location) and SECRET not in str(location)  # ...never shown
    assert "password=***" in location.display()
    url = lake.catalog_url(location)
    assert url.startswith(f"postgres://loader:{SECRET}@db.internal/lake?")
    assert SECRET not in redact(url)


def test_remote_data_path_is_kept_as_url() -> None:
    location = parse_location("ducklake:postgres:dbname=lake", "s3://bucket/lake")
    assert location.data_path == "s3://bucket/lake/"


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        (f"ducklake:sqlite:lake.db password={SECRET}", "unsupported warehouse URI"),
        (f"ducklake:postgres:host=db password={SECRET}", "names no database"),
        (f"ducklake:postgres:dbname=lake password='{SECRET}", "unterminated quote"),
        (f"ducklake:postgres:dbname=lake password={SECRET} port=x", "port must be a number"),
        (f"ducklake:postgres:dbname=lake {SECRET}", "has no '=value'"),
        (f"ducklake:postgres:postgres://u:{SECRET}@h/lake", "not a URL"),
        ("ducklake:postgres:", "no conninfo"),
    ],
)
def test_malformed_uris(location: str, expected: str, tmp_path: Path) -> None:
    assert expected in _error(location, tmp_path)


def test_a_lake_needs_a_data_path() -> None:
    message = _error(f"ducklake:postgres:dbname=lake password={SECRET}")
    assert "needs a data path" in message and "--data-path" in message


def test_a_data_path_with_a_file_warehouse_is_an_error(tmp_path: Path) -> None:
    assert "only used by a DuckLake" in _error(str(tmp_path / "w.duckdb"), tmp_path)


def test_a_data_path_that_cannot_be_written(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    location = parse_location(
        f"ducklake:postgres:dbname=lake password={SECRET}", blocker / "data"
    )
    # check_location asks the catalog first (that writes nothing); the data path alone:
    with pytest.raises(WarehouseLocationError, match="cannot be written") as info:
        lake.check_data_path(location)
    assert SECRET not in str(info.value) and "\n" not in str(info.value)
    assert not (blocker / "data").exists()
    # with the CLI and a reachable catalog: tests/lake/test_lake_cli.py


def test_an_unreachable_catalog(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    location = parse_location(
        f"ducklake:postgres:dbname=lake host=127.0.0.1 port={port} user=x "
        f"password={SECRET} connect_timeout=3",
        tmp_path / "data",
    )
    with pytest.raises(WarehouseLocationError, match="cannot reach the DuckLake catalog") as info:
        lake.check_location(location)
    message = str(info.value)
    assert "\n" not in message and SECRET not in message
    assert "password=***" in message
    with pytest.raises(WarehouseLocationError, match="cannot open the DuckLake") as info:
        lake.connect(location)
    assert SECRET not in str(info.value)


def test_a_missing_catalog_database(postgres: PostgresCluster, tmp_path: Path) -> None:
    location = parse_location(
        f"ducklake:postgres:{postgres.conninfo('no_such_db')} password={SECRET}",
        tmp_path / "data",
    )
    with pytest.raises(WarehouseLocationError, match="no_such_db") as info:
        lake.check_location(location)
    assert SECRET not in str(info.value)


def test_analyst_lines_are_read_only_and_hold_no_password(tmp_path: Path) -> None:
    location = parse_location(
        f"ducklake:postgres:dbname=lake host=db user=analyst password={SECRET}",
        tmp_path / "data",
    )
    sql = lake.analyst_attach_sql(location)
    assert SECRET not in sql and "password" not in sql
    assert (
        "ATTACH 'ducklake:postgres:dbname=lake host=db user=analyst' AS lake "
        f"(DATA_PATH '{tmp_path / 'data'}/', READ_ONLY);"
    ) in sql


def test_namespaces_get_distinct_slugs() -> None:
    slugs = {lake_pipeline.namespace_slug(n) for n in ("ns-1", "ns_1", "NS-1", "ns 1")}
    assert len(slugs) == 4
    assert all(s.replace("_", "").isalnum() and s.islower() for s in slugs)


def test_open_an_empty_lake_read_write_then_read_only(lake_location) -> None:
    con = lake.connect(lake_location)
    try:
        con.execute("create schema raw")
        con.execute("create table raw.t as select range as x from range(1, 10001)")
        assert con.execute("select current_database()").fetchone()[0] == "lake"
    finally:
        con.close()
    con = lake.connect(lake_location, read_only=True)
    try:
        assert con.execute("select count(*), sum(x) from raw.t").fetchall() == [
            (10_000, 50_005_000)
        ]
        with pytest.raises(Exception, match="read-only|read only"):
            con.execute("insert into raw.t values (2)")
    finally:
        con.close()
    # the rows live as Parquet under the data path (small inserts may be inlined in the
    # catalog; ten thousand rows are not)
    assert list(Path(lake_location.data_path).rglob("*.parquet"))
