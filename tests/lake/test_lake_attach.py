"""A step attaches the lake once: however often it reads or writes the warehouse
through its owner, the catalog sees the sessions of one ATTACH (plus the catalog probe
of the first check), counted by PostgreSQL itself (``pg_stat_database.sessions``)."""

from __future__ import annotations

import subprocess
import time

from diligence import lake
from diligence.location import WarehouseLocation, parse_conninfo
from diligence.warehouse import Warehouse

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
