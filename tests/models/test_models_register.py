"""The register as of a date (`diligence models --as-of TS --out FILE`): after three syncs
with changes between them (an answer changed, a document renamed, then a connection
removed, a document deleted, another answer changed), the register at each sync's time,
or between two syncs, equals table for table the models of a warehouse stopped after
that sync, built with the same as_of; a date before the first sync is a clear error;
the warehouse's analytics and analysts' copy stay as they were. An as-of export carries
register.json (the moment, the sync, the evidence head, each file's hash) and every row
its response: `diligence verify DIR` proves it against the store and names a file
edited or added, a row that claims a later sync's response, a head not in the chain."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from diligence.analytics import rebuild_analytics
from diligence.analytics.models import build_models
from diligence.analytics.register import build_register
from diligence.errors import RegisterError
from diligence.evidence.chain import read_store
from diligence.report.export import REPORTS
from diligence.warehouse import Warehouse, published_path
from sandbox import edits
from sandbox.server import SandboxServer
from tests.cli.helpers import SECRET, run
from tests.evidence.test_verify import change_an_answer
from tests.helpers import copy_warehouse, settings_for

#: computed when read, in the stopped warehouse's present build (a view on the reader's clock)
READ_CLOCK = {"freshness": ("hours_since_last_success", "evaluated_at")}


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[Path], list[datetime]]]:
    """(the warehouse after three syncs, built as of the third, a copy of it after each
    sync before (the warehouse itself for the third), each sync's time)."""
    from diligence.sync import run_sync

    folder = tmp_path_factory.mktemp("register")
    warehouse = folder / "w.duckdb"
    stopped: list[Path] = []
    with SandboxServer(scale="small", password=SECRET) as server:
        settings = settings_for(server, password=SECRET, max_concurrency=4)
        world = server.world
        ns = world.namespaces[0]
        pairs = [(c, t) for c, t in world.readable_pairs(ns) if c != ns]
        run_sync(warehouse, settings)
        stopped.append(copy_warehouse(warehouse, folder / "first" / "w.duckdb"))
        change_an_answer(server, *pairs[0])
        edits.update_document(world, world.documents(*pairs[1])[0]["id"],
                              set_fields={"name": "renewed certificate.pdf"})
        run_sync(warehouse, settings)
        stopped.append(copy_warehouse(warehouse, folder / "second" / "w.duckdb"))
        edits.remove_connection(world, ns, pairs[2][0])
        edits.delete_document(world, next(d["id"] for c, t in pairs[3:] for d in world.documents(c, t)))
        change_an_answer(server, *pairs[1])
        run_sync(warehouse, settings)
    stopped.append(warehouse)
    times = [_last_sync(path) for path in stopped]
    rebuild_analytics(warehouse, as_of=times[2])  # its present analytics and analysts' copy
    yield warehouse, stopped, times


def analytics_tables(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every table and view of `analytics` in `path` (the build's spares left out), its
    rows sorted, without the columns computed on the reader's clock."""
    with duckdb.connect(str(path), read_only=True) as con:
        names = [name for (name,) in con.execute(
            "select table_name from information_schema.tables where table_schema = 'analytics' "
            "and table_name not like '%\\_\\_build' escape '\\' order by 1").fetchall()]
        found = {}
        for name in names:
            columns = [c for (c,) in con.execute(
                "select column_name from information_schema.columns where table_schema = 'analytics' "
                f"and table_name = '{name}' order by ordinal_position").fetchall()
                if c not in READ_CLOCK.get(name, ())]
            rows = con.execute(f"select {', '.join(columns)} from analytics.{name}").fetchall()
            found[name] = sorted(rows, key=repr)
        return found


def test_the_register_at_a_sync_or_between_two_equals_the_warehouse_stopped_there(
        history: tuple[Path, list[Path], list[datetime]], tmp_path: Path) -> None:
    warehouse, stopped, times = history
    before = (published_path(warehouse).stat().st_mtime_ns, analytics_tables(warehouse))
    moments = [times[0] + (times[1] - times[0]) / 2, times[1], times[2]]  # between, at, at
    registers = []
    for index, (copy, moment) in enumerate(zip(stopped, moments, strict=True)):
        out = tmp_path / f"register-{index}.duckdb"
        result = build_register(warehouse, moment, out)
        assert result.out == out and result.synced_at == times[index] and not result.failed_checks
        if copy != warehouse:  # the warehouse stopped after that sync, the same as_of
            build_models(copy, as_of=moment)
        expected, found = analytics_tables(copy), analytics_tables(out)
        assert found.keys() == expected.keys()
        for table in expected:
            assert found[table] == expected[table], (moment, table)
        with duckdb.connect(str(out), read_only=True) as con:
            headline = con.execute("select evaluated_at, last_success_at from analytics.headline").fetchone()
            freshness = con.execute("select distinct evaluated_at from analytics.freshness").fetchall()
        assert headline == (moment, times[index]) and freshness == [(moment,)]  # which sync, and when
        registers.append(found)
    # the history shows: a connection gone, a document deleted (and the gone connection's),
    # an answer changed, in the feed
    assert len(registers[2]["connections"]) == len(registers[1]["connections"]) - 1
    assert len(registers[2]["document_expiry"]) < len(registers[1]["document_expiry"])
    assert not registers[0]["changes"] and registers[1]["changes"] and len(registers[2]["changes"]) > len(
        registers[1]["changes"])
    # the warehouse's own analytics and the analysts' copy are as they were; nothing left beside
    assert (published_path(warehouse).stat().st_mtime_ns, analytics_tables(warehouse)) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"register-{i}.duckdb" for i in range(3)]


def test_a_date_before_the_first_sync_or_an_out_not_to_replace_is_a_clear_error(
        history: tuple[Path, list[Path], list[datetime]], tmp_path: Path) -> None:
    warehouse, stopped, times = history
    early = times[0] - timedelta(days=1)
    with pytest.raises(RegisterError, match=r"is before the warehouse's first sync \(2"):
        build_register(warehouse, early, tmp_path / "r.duckdb")
    for out in (warehouse, published_path(warehouse)):
        with pytest.raises(RegisterError, match="is the warehouse or its analysts' copy"):
            build_register(warehouse, times[1], out)
    assert list(tmp_path.iterdir()) == []
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    for out, why in ((tmp_path, "is not a regular file"), (notes, "exists and is not a DuckDB file"),
                     (stopped[0], r"is a warehouse \(it has raw tables\)")):
        with pytest.raises(RegisterError, match=why):
            build_register(warehouse, times[1], out)
    assert notes.read_text() == "mine" and [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    notes.unlink()
    refused = run(["models", "-w", str(warehouse), "--as-of", early.isoformat(), "--out", "r.duckdb"], tmp_path)
    assert refused.returncode == 2 and "before the warehouse's first sync" in refused.stderr
    past = run(["models", "-w", str(warehouse), "--as-of", early.isoformat()], tmp_path)
    assert past.returncode == 2 and "pass --out FILE for the register as of then" in past.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_lake_has_no_register_yet(tmp_path: Path) -> None:
    lake = Warehouse("ducklake:postgres:dbname=lake host=127.0.0.1", data_path=str(tmp_path / "lake"))
    with pytest.raises(RegisterError, match="needs a DuckDB file warehouse, not a lake"):
        build_register(lake, datetime.now(UTC), tmp_path / "r.duckdb")
    assert list(tmp_path.iterdir()) == []


def test_the_cli_names_the_sync_the_register_stands_on(
        history: tuple[Path, list[Path], list[datetime]], tmp_path: Path) -> None:
    warehouse, _stopped, times = history
    moment = times[1] + timedelta(seconds=1)
    built = run(["models", "-w", str(warehouse), "--as-of", moment.isoformat(), "--out", "q.duckdb"], tmp_path)
    assert built.returncode == 0, built.stderr
    assert f"register as of {moment.isoformat()} (the sync of {times[1].isoformat()}) built in " in built.stdout
    assert built.stdout.rstrip().endswith(f"all data checks passed; register: {tmp_path / 'q.duckdb'}")


def _last_sync(warehouse: Path) -> datetime:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        (moment,) = con.execute("select max(synced_at) from raw.sync_runs").fetchone()  # type: ignore[misc]
    return moment


def test_an_as_of_export_carries_its_proof_and_verify_checks_it(
        history: tuple[Path, list[Path], list[datetime]], tmp_path: Path) -> None:
    warehouse, _stopped, times = history
    moment = times[1] + timedelta(seconds=1)
    exported = run(["export", "-w", str(warehouse), "--as-of", moment.isoformat(), "--out", "q"], tmp_path)
    assert exported.returncode == 0, exported.stderr
    folder = tmp_path / "q"
    register = json.loads((folder / "register.json").read_text())
    head = read_store(warehouse.with_name("w.evidence")).head
    assert head is not None and register["evidence_head"] == head[0]
    assert (register["as_of"], register["synced_at"]) == (moment.isoformat(), times[1].isoformat())
    assert sorted(register["files"]) == sorted(f"{report}.csv" for report in REPORTS)
    for name in register["files"]:  # every row names the response it was read from
        with open(folder / name, newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert rows and all(len(row["response_sha256"]) == 64 for row in rows), name
    verified = run(["verify", str(folder), "-w", str(warehouse)], tmp_path)
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.startswith(f"verified the register {folder}: ")

    def forged(name: str, change: Callable[[Path], None], rehash: bool = True) -> list[str]:
        copy = tmp_path / name
        shutil.copytree(folder, copy)
        change(copy)
        if rehash:  # a forger who also rewrites register.json's hashes
            listed = json.loads((copy / "register.json").read_text())
            for file in listed["files"]:
                listed["files"][file]["sha256"] = hashlib.sha256((copy / file).read_bytes()).hexdigest()
            (copy / "register.json").write_text(json.dumps(listed))
        checked = run(["verify", str(copy), "-w", str(warehouse)], tmp_path)
        assert checked.returncode == 1, checked.stdout
        return checked.stderr.splitlines()

    def edit(path: Path, old: str, new: str) -> None:
        path.write_text(path.read_text().replace(old, new, 1))

    later = _later_response(warehouse, times[2])
    first_sha = next(csv.DictReader(open(folder / "connections.csv", newline="")))["response_sha256"]
    assert forged("edited", lambda c: edit(c / "connections.csv", ",", ";"), rehash=False) == [
        "connections.csv does not hash to the SHA-256 register.json records: it was edited"]
    (line,) = forged("later", lambda c: edit(c / "connections.csv", first_sha, later))
    assert line.startswith("connections.csv row 1: response ") and f"a sync up to {moment.isoformat()}" in line
    assert forged("headless", lambda c: edit(c / "register.json", head[0], "ab" * 32)) == [
        f"the evidence head {'ab' * 32} that register.json names is not a seal of the store's chain"]
    assert forged("added", lambda c: shutil.copy(c / "answers.csv", c / "answers.parquet")) == [
        "answers.parquet is not named by register.json: it was added"]


def _later_response(warehouse: Path, synced_at: datetime) -> str:
    """A response the sync at `synced_at` read first (the answer it changed)."""
    with duckdb.connect(str(warehouse), read_only=True) as con:
        (sha,) = con.execute("select any_value(response_sha256) from raw.questionnaires "
                             "where _dlt_valid_from = ?", [synced_at]).fetchone()  # type: ignore[misc]
    return sha
