"""End to end against `diligence sandbox --hostile`: sync, exports, report, artifacts
and the download folder keep counterparty attacks inert."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from diligence.sync import NamespaceOutcome
from diligence.warehouse import Warehouse
from flows.report import expiring_documents_table, summary_markdown
from sandbox.hostile import HOSTILE_TEXTS, OVERSIZE_FILE_BYTES
from sandbox.server import DEFAULT_EMAIL, SandboxServer
from tests.files import csv_columns, csv_rows, parquet_rows

from .helpers import SECRET, run

#: every C0/C1 control character but the newline that ends each line
_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")
_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
_TEXT_COLUMNS = ("company_name", "name", "answer_text", "document_name", "old_answer_text",
                 "new_answer_text")


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One sync with documents, CSV and Parquet exports and the HTML report."""
    work = tmp_path_factory.mktemp("hostile")
    env = {"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
           "SOURCES__COMPANY_CONNECTIONS__PASSWORD": SECRET,
           "SOURCES__COMPANY_CONNECTIONS__MAX_DOWNLOAD_BYTES": str(OVERSIZE_FILE_BYTES // 2)}
    with SandboxServer(scale="small", hostile=True, password=SECRET) as sandbox:
        sync = run(["sync", "--base-url", sandbox.base_url, "--warehouse", "w.duckdb",
                    "--download-documents", "docs"], work, env)
        namespaces = sandbox.world.namespaces
    csv = run(["export", "--format", "csv", "--out", "csv", "--warehouse", "w.duckdb"], work)
    parquet = run(["export", "--format", "parquet", "--out", "pq", "--warehouse", "w.duckdb"], work)
    report = run(["report", "--warehouse", "w.duckdb", "--out", "report.html"], work)
    status = run(["status", "--warehouse", "w.duckdb"], work)
    return {"work": work, "sync": sync, "csv": csv, "parquet": parquet, "report": report,
            "status": status, "namespaces": namespaces}


def test_the_deep_answer_fails_its_namespace_and_the_oversize_document_fails_alone(hostile_run) -> None:  # type: ignore[no-untyped-def]
    sync = hostile_run["sync"]
    first, last = hostile_run["namespaces"][0], hostile_run["namespaces"][-1]
    assert sync.returncode != 0  # a namespace could not be fully extracted
    assert f"ok     {first}:" in sync.stdout and f"FAILED {last}:" in sync.stdout
    failed = [line for line in sync.stderr.splitlines() if f"namespace {last} not loaded" in line]
    assert len(failed) == 1 and "nested deeper than 64 levels; refused" in failed[0]
    too_large = [line for line in sync.stderr.splitlines() if "max_download_bytes" in line]
    assert len(too_large) == 1 and "ResponseTooLarge" in too_large[0]
    assert "documents: " in sync.stdout and ", 2 failed," in sync.stdout  # and a 404


def test_cli_output_carries_no_control_character(hostile_run) -> None:  # type: ignore[no-untyped-def]
    for name in ("sync", "csv", "parquet", "report", "status"):
        result = hostile_run[name]
        for stream in (result.stdout, result.stderr):
            assert not _CONTROLS.search(stream), (name, _CONTROLS.search(stream))
    assert SECRET not in hostile_run["sync"].stdout + hostile_run["sync"].stderr
    # the service's hostile error body is quoted in a log line, its escapes shown as text
    (quoted,) = [line for line in hostile_run["sync"].stderr.splitlines() if "HTTP 404" in line]
    assert "\\x1b[2J\\x1b]8;;http://evil.test\\x07" in quoted


def test_csv_cells_never_start_a_formula_and_parquet_keeps_the_text(hostile_run) -> None:  # type: ignore[no-untyped-def]
    work = hostile_run["work"]
    assert hostile_run["csv"].returncode == 0 and hostile_run["parquet"].returncode == 0
    guarded = 0
    for path in sorted((work / "csv").glob("*.csv")):
        rows = csv_rows(path)
        for column in set(csv_columns(path)) & set(_TEXT_COLUMNS):
            values = [row[column] for row in rows]
            assert not [value for value in values if value.startswith(_TRIGGERS)], (path.name, column)
            guarded += sum(value.startswith("'=") for value in values)
    assert guarded > 0  # the hostile text did reach the exports
    names = {row["company_name"] for row in parquet_rows(work / "pq" / "connections.parquet")}
    assert "=cmd|' /C calc'!A0" in names


def test_the_html_report_shows_injected_html_as_text(hostile_run) -> None:  # type: ignore[no-untyped-def]
    assert hostile_run["report"].returncode == 0
    html = (hostile_run["work"] / "report.html").read_text()
    assert "onerror=alert(1)" in html  # the name is there ...
    assert "<img src=x" not in html and "<script>alert" not in html  # ... never as markup


def test_artifacts_show_upstream_text_escaped(hostile_run) -> None:  # type: ignore[no-untyped-def]
    work = hostile_run["work"]
    rows, total = expiring_documents_table(Warehouse(work / "w.duckdb"))
    assert total > 0
    shown = " ".join(str(v) for row in rows for v in row.values())
    assert not _CONTROLS.search(shown)
    with duckdb.connect(str(work / "w.duckdb"), read_only=True) as con:
        names = [n for (n,) in con.execute("select distinct company_name from analytics.connections").fetchall()]
    assert set(HOSTILE_TEXTS) & set(names)
    outcomes = [NamespaceOutcome(namespace_company_id=name, status="failed", requests=1, rows=0, issues=0,
                                 duration_seconds=0.1, error=name) for name in names]
    markdown = summary_markdown(outcomes, row_counts={}, checks=[], exported=[])
    assert "\x1b" not in markdown
    outside_code = re.sub(r"`[^`]*`", "", markdown)  # a code span shows its text as is
    assert "\\[x\\](http://evil" in outside_code  # the error text, escaped
    assert "](http://evil" not in outside_code.replace("\\](http://evil", "")
    assert "\\<img" in outside_code and "<img" not in outside_code.replace("\\<img", "")


def test_downloaded_files_have_plain_names_inside_the_folder(hostile_run) -> None:  # type: ignore[no-untyped-def]
    folder = (hostile_run["work"] / "docs").resolve()
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert len(files) > 10
    for path in folder.rglob("*"):
        assert not path.is_symlink() and path.resolve().is_relative_to(folder)
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", path.name), path.name
    assert not Path("/etc/passwd").is_relative_to(folder)
