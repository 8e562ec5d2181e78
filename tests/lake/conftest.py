"""Fixtures of the lake tests: one real PostgreSQL cluster per session (see postgres.py),
a fresh catalog database and data path per test."""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from diligence.warehouse.location import WarehouseLocation, parse_location

from .objectstore import ObjectStore, object_store
from .postgres import PostgresCluster, PostgresUnavailable, new_cluster

_databases = itertools.count(1)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    try:
        cluster = new_cluster()
    except PostgresUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)
    try:
        cluster.start()
    except Exception as exc:  # the message says which step failed and shows the log
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)
        pytest.fail(f"PostgreSQL did not start: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)


@pytest.fixture
def lake_location(postgres: PostgresCluster, tmp_path: Path) -> WarehouseLocation:
    """A new, empty lake: its own catalog database and data path."""
    dbname = f"lake_{next(_databases)}"
    return parse_location(
        "ducklake:postgres:" + postgres.create_database(dbname), tmp_path / "lakedata"
    )


@pytest.fixture(scope="session")
def bucket(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ObjectStore]:
    """An S3-compatible server (moto on 127.0.0.1, behind a relay a test can stop) with
    one bucket and fresh credentials; each test works under a prefix of its own."""
    with object_store(tmp_path_factory.mktemp("moto") / "moto.log") as store:
        yield store
