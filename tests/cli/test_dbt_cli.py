"""The CLI over the dbt project: a model that fails is one line naming it (exit 1),
`--as-of` reaches the models as a dbt var, `dbt-profile`, `docs` and `status --sources`."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.models.conftest import make_clean_raw
from tests.models.rawdb import insert, questionnaire

from .helpers import error_lines, run

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class BuiltOnce:
    #: the folder of the warehouse (`w.duckdb`) and its analysts' copy
    folder: Path
    #: what `diligence models` printed
    stdout: str


@pytest.fixture(scope="module")
def built_once(tmp_path_factory: pytest.TempPathFactory) -> BuiltOnce:
    """A folder whose clean raw warehouse `diligence models --as-of ... --publish` built
    once (the analysts' copy beside it); tests that start from a built warehouse copy the
    folder."""
    warehouse = make_clean_raw(tmp_path_factory.mktemp("built") / "w.duckdb")
    result = run(["models", "--warehouse", "w.duckdb", "--as-of", "2026-03-01T00:00:00", "--publish"],
                 warehouse.parent)
    assert result.returncode == 0, result.stderr
    return BuiltOnce(warehouse.parent, result.stdout)


@pytest.fixture
def built(built_once: BuiltOnce, tmp_path: Path) -> Path:
    """This test's own copy of the built warehouse."""
    shutil.copytree(built_once.folder, tmp_path, dirs_exist_ok=True)
    return tmp_path / "w.duckdb"


def test_models_as_of_is_the_build_now(built_once: BuiltOnce) -> None:
    assert "all data checks passed" in built_once.stdout
    with duckdb.connect(str(built_once.folder / "w.duckdb"), read_only=True) as con:
        [(evaluated,)] = con.execute(
            "select distinct cast(evaluated_at at time zone 'UTC' as varchar) from analytics.document_expiry"
        ).fetchall()
        schemas = {row[0] for row in con.execute("select schema_name from duckdb_schemas()").fetchall()}
    assert evaluated == "2026-03-01 00:00:00"
    assert "analytics_build" not in schemas


def test_a_failing_model_is_one_line_naming_it(built: Path) -> None:
    warehouse = built
    published = warehouse.with_name("w-analytics.duckdb")
    before = published.stat().st_mtime_ns
    insert(warehouse, "questionnaires", [questionnaire("ns-a", "c9", "t9", "{not json")])
    result = run(["models", "--warehouse", "w.duckdb"], warehouse.parent)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    [line] = error_lines(result.stderr)
    assert "model analytics.answer_history failed" in line
    # analytics kept the previous build, and the analysts' copy was not touched
    with duckdb.connect(str(warehouse), read_only=True) as con:
        assert con.execute("select count(*) from analytics.answers").fetchone()[0] > 0
    assert published.stat().st_mtime_ns == before


def test_dbt_profile_docs_and_source_freshness(built: Path) -> None:
    warehouse = built
    cwd = warehouse.parent

    profile = run(["dbt-profile", "--warehouse", "w.duckdb"], cwd)
    assert profile.returncode == 0, profile.stderr
    output = yaml.safe_load(profile.stdout)["diligence"]["outputs"]["analytics"]
    assert output["schema"] == "analytics"
    assert output["attach"] == [{"alias": "warehouse", "path": str(warehouse.resolve())}]

    docs = run(["docs", "--warehouse", "w.duckdb", "--out", "site"], cwd)
    assert docs.returncode == 0, docs.stderr
    page = (cwd / "site" / "index.html").read_text(encoding="utf-8")
    assert "document_expiry" in page and "answers__unique_key" in page

    status = run(["status", "--warehouse", "w.duckdb", "--sources", "--json"], cwd)
    assert status.returncode == 0, status.stderr
    sources = {s["table"]: s for s in json.loads(status.stdout)["sources"]}
    assert sources["companies"]["max_loaded_at"] is not None
    assert {s["status"] for s in sources.values()} <= {"pass", "warn", "error", "missing", "empty"}


def test_dbt_profile_of_a_lake_has_no_password(tmp_path: Path) -> None:
    result = run(
        ["dbt-profile", "--warehouse", "ducklake:postgres:dbname=lake host=db user=loader password=hunter2",
         "--data-path", str(tmp_path / "files")],
        tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "hunter2" not in result.stdout + result.stderr
    [attach] = yaml.safe_load(result.stdout)["diligence"]["outputs"]["analytics"]["attach"]
    assert attach["path"].startswith("ducklake:postgres:dbname=lake host=db user=loader")
    assert "PGPASSWORD" in result.stdout
