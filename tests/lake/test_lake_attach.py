"""A step attaches the lake once: however often it reads or writes the warehouse
through its owner, the catalog sees the sessions of one ATTACH (plus the catalog probe
of the first check), counted by PostgreSQL itself (``pg_stat_database.sessions``). A
namespace's sync, dlt's load included, is such a step."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from diligence.warehouse import Warehouse, lake
from diligence.warehouse.location import WarehouseLocation, parse_conninfo
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.cli.helpers import run

from .postgres import PostgresCluster


def _sessions(postgres: PostgresCluster, dbname: str) -> int:
    """Sessions opened on `dbname` so far (this query's own included), once the count
    has settled: a session's start reaches the statistics shortly after it ends."""
    last = -1
    deadline = time.monotonic() + 10
    while True:
        done = subprocess.run(
            [str(postgres.bindir / "psql"), "-h", "127.0.0.1", "-p", str(postgres.port),
             "-U", "postgres", "-d", "postgres", "-Atc",
             f"select sessions from pg_stat_database where datname = '{dbname}'"],
            capture_output=True, text=True, timeout=30, check=True,
        )
        count = int(done.stdout.strip())
        if count == last or time.monotonic() > deadline:
            return count
        last = count
        time.sleep(0.3)


def _opened(postgres: PostgresCluster, dbname: str, action: object) -> int:
    before = _sessions(postgres, dbname)
    action()  # type: ignore[operator]
    return _sessions(postgres, dbname) - before


def test_a_step_attaches_the_lake_once(
    postgres: PostgresCluster, lake_location: WarehouseLocation
) -> None:
    dbname = parse_conninfo(lake_location.conninfo or "")["dbname"]
    lake.initialise(lake_location)  # the catalog exists: attaching it creates nothing

    def one_attach() -> None:
        lake.check_location(lake_location)
        lake.connect(lake_location).close()

    def step() -> None:
        owner = Warehouse(lake_location)
        with owner.writing():
            assert owner.synced_namespaces() == []
            assert owner.exists()
            with owner.session() as con:
                con.execute("create table if not exists raw.probe (x integer)")
                con.execute("insert into raw.probe values (1)")
            with owner.session() as con:
                assert con.execute("select count(*) from raw.probe").fetchone() == (1,)

    expected = _opened(postgres, dbname, one_attach)
    assert expected >= 1
    assert _opened(postgres, dbname, step) == expected


@pytest.fixture(scope="module")
def server() -> Iterator[SandboxServer]:
    with SandboxServer(scale="small") as sandbox:
        yield sandbox


def _sync(args: list[str], cwd: Path, **extra: str) -> None:
    """`diligence sync ARGS` in this process (:func:`tests.cli.helpers.run`)."""
    done = run(["sync", *args], cwd, {"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
                                      "SOURCES__COMPANY_CONNECTIONS__PASSWORD": DEFAULT_PASSWORD,
                                      **extra})
    assert done.returncode == 0, (done.stdout, done.stderr)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_namespace_sync_attaches_the_lake_once(
    postgres: PostgresCluster, lake_location: WarehouseLocation, server: SandboxServer,
    tmp_path: Path,
) -> None:
    """`diligence sync --namespace X` (its dlt load included) opens the catalog sessions
    of one step: the catalog probe and one ATTACH, as a step without dlt does.

    dlt's jobs run one at a time here (``LOAD__WORKERS=1``): side by side, the one
    ATTACH's pool opens a PostgreSQL connection per transaction running at once, a
    number that depends on timing; one at a time, its one connection serves them all."""
    dbname = parse_conninfo(lake_location.conninfo or "")["dbname"]
    options = ["--no-models", "--warehouse", lake_location.uri,
               "--data-path", str(lake_location.data_path), "--base-url", server.base_url]
    _sync(options, tmp_path)  # every namespace in: the runs below change tables, not create
    namespace = server.truth()["namespaces"][0]

    def one_step() -> None:
        lake.check_location(lake_location)
        lake.connect(lake_location).close()

    expected = _opened(postgres, dbname, one_step)
    def namespace_sync() -> None:
        _sync(["--namespace", namespace, *options], tmp_path, LOAD__WORKERS="1")

    assert _opened(postgres, dbname, namespace_sync) == expected
