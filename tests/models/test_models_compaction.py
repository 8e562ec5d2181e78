"""A warehouse file written anew once a quarter of it is free (diligence.warehouse.compact):
everything kept, nothing left behind, and the old file kept whenever anything goes wrong."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from diligence.warehouse import Warehouse
from diligence.warehouse import compact as compact_module
from diligence.warehouse.compact import COMPACT_AT_FREE_SHARE, compact_if_wasteful, free_share
from diligence.warehouse.sql import sql_identifier


def _free(path: Path) -> float:
    with duckdb.connect(str(path), read_only=True) as con:
        return free_share(con, con.execute("select current_database()").fetchone()[0])


def wasteful(clean_warehouse: Path) -> Path:
    """The built warehouse with a large table written and dropped before another one: most
    of it free (free blocks at the end of a file are cut off, those before are kept)."""
    with duckdb.connect(str(clean_warehouse)) as con:
        con.execute("create table staging.scratch as select range as n, md5(range::varchar) as h from range(400000)")
        con.execute("checkpoint")
        con.execute("create table staging.kept as select range as n, md5(range::varchar) as h from range(20000)")
        con.execute("checkpoint")
        con.execute("drop table staging.scratch")
        con.execute("checkpoint")
    assert _free(clean_warehouse) >= COMPACT_AT_FREE_SHARE
    return clean_warehouse


def tables(path: Path) -> list[tuple[str, str]]:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute("select schema_name, table_name from duckdb_tables() order by all").fetchall()


def assert_same_contents(before: Path, after: Path) -> None:
    """Every table holds the same rows (as multisets), every view (its columns: DuckDB
    writes its SQL anew) and comment is there."""
    with duckdb.connect() as con:
        con.execute(f"attach '{before}' as before_db (read_only)")
        con.execute(f"attach '{after}' as after_db (read_only)")
        catalog = ("select schema_name, table_name, comment from duckdb_tables() where database_name = ? "
                   "union all select schema_name, view_name, '' from duckdb_views() where database_name = ? "
                   "union all select schema_name, table_name || '.' || column_name, data_type || coalesce(comment, '') "
                   "from duckdb_columns() "
                   "where database_name = ? order by all")
        assert con.execute(catalog, ["before_db"] * 3).fetchall() == con.execute(catalog, ["after_db"] * 3).fetchall()
        for schema, table in con.execute(
                "select schema_name, table_name from duckdb_tables() where database_name = 'before_db'").fetchall():
            name = f"{sql_identifier(schema)}.{sql_identifier(table)}"
            counts = con.execute(f"select (select count(*) from before_db.{name}), (select count(*) from after_db.{name})"
                                 ).fetchone()
            assert counts[0] == counts[1], name
            differing = con.execute(f"select count(*) from (select * from before_db.{name} "
                                    f"except all select * from after_db.{name})").fetchone()[0]
            assert differing == 0, name


def test_a_wasteful_file_is_written_anew_with_everything_in_it(clean_warehouse: Path, tmp_path: Path) -> None:
    path = wasteful(clean_warehouse)
    (tmp_path / "kept").mkdir()
    before = shutil.copyfile(path, tmp_path / "kept" / "before.duckdb")
    done = compact_if_wasteful(path)
    assert done is not None and done.bytes_after < 0.6 * done.bytes_before
    assert path.stat().st_size == done.bytes_after
    assert _free(path) < COMPACT_AT_FREE_SHARE
    assert_same_contents(before, path)
    # the views still read their tables, and dbt's comments came along
    with duckdb.connect(str(path), read_only=True) as con:
        assert con.execute("select count(*) from analytics.document_expiry").fetchone()[0] == 4
        assert con.execute("select count(*) from duckdb_columns() where schema_name = 'analytics' "
                           "and comment is not null").fetchone()[0] > 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert sorted(p.name for p in path.parent.iterdir()) == ["kept", "warehouse.duckdb"]  # no new file or WAL left


def test_a_warehouse_whose_name_is_the_new_files_alias_is_compacted_too(clean_warehouse: Path) -> None:
    # the new file is attached beside the warehouse, under an alias of its own
    path = wasteful(clean_warehouse).rename(clean_warehouse.with_name("compacting.duckdb"))
    done = compact_if_wasteful(path)
    assert done is not None and path.stat().st_size == done.bytes_after
    assert _free(path) < COMPACT_AT_FREE_SHARE


def test_a_file_with_little_free_is_left_alone(clean_warehouse: Path) -> None:
    identity = os.stat(clean_warehouse)
    assert _free(clean_warehouse) < COMPACT_AT_FREE_SHARE
    assert compact_if_wasteful(clean_warehouse) is None
    assert os.stat(clean_warehouse).st_ino == identity.st_ino


def test_a_link_keeps_pointing_at_the_compacted_file(clean_warehouse: Path, tmp_path: Path) -> None:
    path = wasteful(clean_warehouse)
    link = tmp_path / "elsewhere" / "link.duckdb"
    link.parent.mkdir()
    link.symlink_to(path)
    assert compact_if_wasteful(link) is not None
    assert link.is_symlink() and link.resolve() == path.resolve()
    assert _free(path) < COMPACT_AT_FREE_SHARE


def test_a_new_file_that_differs_is_thrown_away(
    clean_warehouse: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = wasteful(clean_warehouse)
    identity = os.stat(path)
    monkeypatch.setattr(compact_module, "_difference", lambda con, old, new: "raw.companies: 2 rows, copied 1")
    assert compact_if_wasteful(path) is None
    assert os.stat(path).st_ino == identity.st_ino and os.stat(path).st_size == identity.st_size
    assert "the new file differs (raw.companies: 2 rows, copied 1); the old one is kept" in caplog.text
    assert sorted(p.name for p in path.parent.iterdir()) == ["warehouse.duckdb"]


def test_a_new_file_that_cannot_be_written_leaves_the_old(
    clean_warehouse: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = wasteful(clean_warehouse)
    identity = os.stat(path)
    monkeypatch.setattr(compact_module, "compacting_path", lambda warehouse, token: path.parent / "gone" / "new.duckdb")
    assert compact_if_wasteful(path) is None
    assert os.stat(path).st_ino == identity.st_ino
    assert "not compacting warehouse.duckdb" in caplog.text
    assert sorted(p.name for p in path.parent.iterdir()) == ["warehouse.duckdb"]


def test_a_reader_holding_the_file_keeps_it_as_it_is(clean_warehouse: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = wasteful(clean_warehouse)
    identity = os.stat(path)
    reader = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=True); "
         "print('open', flush=True); sys.stdin.read()", str(path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "open"
        assert compact_if_wasteful(path) is None
    finally:
        reader.communicate("", timeout=30)
    assert os.stat(path).st_ino == identity.st_ino
    assert "not compacting warehouse.duckdb" in caplog.text


def test_only_a_writer_without_an_open_session_compacts(clean_warehouse: Path) -> None:
    owner = Warehouse(wasteful(clean_warehouse))
    assert owner.compact() is None  # the writer lock is not held
    with owner.writing():
        with owner.session(memory_limit=None):
            assert owner.compact() is None  # its own session has the file open
        assert owner.compact() is not None
    assert _free(clean_warehouse) < COMPACT_AT_FREE_SHARE


def test_the_model_step_compacts_what_its_build_left_free(
    clean_warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import diligence.analytics
    from diligence.steps import analytics_step

    built = object()  # the build itself is tested elsewhere: here what the step does after it
    monkeypatch.setattr(diligence.analytics, "rebuild_analytics", lambda warehouse, **options: built)
    assert analytics_step(Warehouse(wasteful(clean_warehouse))) is built
    assert _free(clean_warehouse) < COMPACT_AT_FREE_SHARE
