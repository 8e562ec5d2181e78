"""`diligence report` as a user runs it, including its errors (in this process: :func:`tests.cli.helpers.run`)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from tests.cli.helpers import run

from .conftest import Synced

pytestmark = pytest.mark.slow


def test_report_writes_the_file_and_prints_its_path(synced: Synced, tmp_path: Path) -> None:
    result = run(["report", "--warehouse", str(synced.warehouse)], tmp_path)
    assert result.returncode == 0, result.stderr
    written = tmp_path / "reports" / "report.html"  # the default --out
    assert result.stdout.startswith(f"report: {Path('reports/report.html')}")
    html = written.read_text(encoding="utf-8")
    assert html.startswith("<!doctype html>") and "Counterparty diligence report" in html

    out = tmp_path / "elsewhere" / "r.html"
    result = run(["report", "-w", str(synced.warehouse), "--out", str(out)], tmp_path)
    assert result.returncode == 0, result.stderr
    assert str(out) in result.stdout and out.stat().st_size > 500_000


def test_missing_warehouse_is_one_clear_line(tmp_path: Path) -> None:
    missing = tmp_path / "a-rather-long-folder-name-for-the-warehouse" / "nowhere.duckdb"
    result = run(["report", "--warehouse", str(missing), "--out", "r.html"], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: no warehouse at {missing}; run `diligence sync --warehouse {missing}` first"
    )
    assert "Traceback" not in result.stderr and not (tmp_path / "r.html").exists()


def test_warehouse_without_analytics_is_one_clear_line(tmp_path: Path) -> None:
    bare = tmp_path / "raw-only.duckdb"
    with duckdb.connect(str(bare)) as con:
        con.execute("create schema raw; create table raw.sync_runs (sync_id varchar)")
    result = run(["report", "--warehouse", str(bare)], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"error: {bare} has no analytics schema; run `diligence models --warehouse {bare}` first"
    )
    assert not (tmp_path / "reports").exists()


def test_help_names_the_options(tmp_path: Path) -> None:
    result = run(["report", "--help"], tmp_path)
    assert result.returncode == 0
    assert "--warehouse" in result.stdout and "--out" in result.stdout
