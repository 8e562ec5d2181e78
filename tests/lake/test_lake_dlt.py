"""dlt writes a lake through `lake_pipeline_parts`: one pipeline, and two namespaces'
pipelines at the same time (dlt-hub/dlt#4297: with their own pipeline names, dirs and
staging datasets they lose no rows and duplicate none); through dlt's ducklake
destination and through a connection with the lake attached alike."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest

from diligence.warehouse import lake, lake_pipeline
from diligence.warehouse.location import WarehouseLocation

from .dlt_load import ROWS_PER_NAMESPACE, company_rows, load_namespace

NAMESPACES = ("ns-a", "ns-b")


def _versions(location: WarehouseLocation) -> list[tuple]:
    con = lake.connect(location, read_only=True)
    try:
        return con.execute(
            "select namespace_company_id, company_id, name, content_hash, "
            "_dlt_valid_to is null as current from raw.companies order by all"
        ).fetchall()
    finally:
        con.close()


THROUGH = pytest.mark.parametrize("through_connection", [False, True], ids=["ducklake", "connection"])


@THROUGH
def test_a_pipeline_loads_into_the_lake(
    lake_location: WarehouseLocation, tmp_path: Path, through_connection: bool
) -> None:
    parts = lake_pipeline.lake_pipeline_parts(lake_location, "ns-a", pipelines_root=tmp_path / "p")
    assert parts.pipeline_name == f"company_connections_{lake_pipeline.namespace_slug('ns-a')}"
    assert parts.pipelines_dir == (tmp_path / "p" / lake_pipeline.namespace_slug("ns-a")).resolve()
    assert parts.pipelines_dir.stat().st_mode & 0o777 == 0o700
    assert parts.staging_dataset_name_layout == f"%s_staging_{lake_pipeline.namespace_slug('ns-a')}"
    assert "ns-a" not in lake_pipeline.lake_pipeline_parts(
        lake_location, "ns-b", pipelines_root=tmp_path / "p"
    ).staging_dataset_name_layout

    lake.initialise(lake_location)
    load_namespace(
        lake_location.uri, lake_location.data_path, "ns-a", str(tmp_path / "p"),
        through_connection=through_connection,
    )
    rows = _versions(lake_location)
    expected = sorted(
        (r["namespace_company_id"], r["company_id"], r["name"], r["content_hash"], True)
        for r in company_rows("ns-a")
    )
    assert rows == expected
    # the analysts' plain read-only ATTACH (no METADATA_SCHEMA) sees what dlt wrote
    import duckdb

    con = duckdb.connect()
    try:
        lake._load_extensions(con)
        sql = lake.analyst_attach_sql(lake_location).replace("INSTALL ducklake; ", "")
        sql = sql.replace("INSTALL postgres; ", "")
        for statement in sql.split(";"):
            if statement.strip():
                con.execute(statement)
        assert con.execute("select count(*) from raw.companies").fetchone()[0] == len(rows)
    finally:
        con.close()


@pytest.fixture(scope="module")
def writers() -> Iterator[ProcessPoolExecutor]:
    """Two spawned processes, one per namespace, as two workers would be; kept for the
    module's loads (each process imports dlt and DuckDB's extensions once)."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=len(NAMESPACES), mp_context=context) as pool:
        yield pool


def _load_both(
    pool: ProcessPoolExecutor, location: WarehouseLocation, root: Path, changed: int,
    through_connection: bool,
) -> None:
    futures = [
        pool.submit(
            load_namespace, location.uri, location.data_path, namespace, str(root), changed,
            through_connection,
        )
        for namespace in NAMESPACES
    ]
    for future in futures:
        future.result(timeout=240)


@THROUGH
def test_two_namespaces_load_concurrently_without_loss_or_duplicates(
    writers: ProcessPoolExecutor, lake_location: WarehouseLocation, tmp_path: Path,
    through_connection: bool,
) -> None:
    root = tmp_path / "pipelines"
    expected_first = sorted(
        (r["namespace_company_id"], r["company_id"], r["name"], r["content_hash"], True)
        for namespace in NAMESPACES
        for r in company_rows(namespace)
    )
    lake.initialise(lake_location)  # once, before the writers fan out
    _load_both(writers, lake_location, root, changed=0, through_connection=through_connection)
    assert _versions(lake_location) == expected_first

    # again, unchanged: idempotent
    _load_both(writers, lake_location, root, changed=0, through_connection=through_connection)
    assert _versions(lake_location) == expected_first

    # again with ten renamed companies per namespace: each namespace retires its own ten
    # old versions only, and every company has exactly one current version
    _load_both(writers, lake_location, root, changed=10, through_connection=through_connection)
    rows = _versions(lake_location)
    assert len(rows) == len(NAMESPACES) * (ROWS_PER_NAMESPACE + 10)
    current = [row for row in rows if row[4]]
    assert sorted(current) == sorted(
        (r["namespace_company_id"], r["company_id"], r["name"], r["content_hash"], True)
        for namespace in NAMESPACES
        for r in company_rows(namespace, changed=10)
    )
    retired = [row for row in rows if not row[4]]
    assert sorted((r[0], r[1]) for r in retired) == sorted(
        (namespace, f"co-{n}") for namespace in NAMESPACES for n in range(10)
    )
    assert len({(r[0], r[1]) for r in current}) == len(current)
