"""Every build leaves dbt's artifacts beside the warehouse, replaced by the next build:
the JSON artifacts, the compiled and run SQL and dbt.log; a failing model's message
names the SQL that ran with the database's caret; and dbt's state selection works on
them."""

from __future__ import annotations

import json
import re
import shutil
import stat
from pathlib import Path

import pytest

import diligence.analytics as analytics
from diligence.analytics.dbt import PROJECT_DIR, artifacts_dir, forget_parse, invoke, location_of
from diligence.analytics.models import ModelsResult, build_models
from diligence.errors import ModelError
from tests.cli.helpers import run

from .test_models_custom import _project_with


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_build_leaves_dbts_artifacts_beside_the_warehouse(
        clean_build: tuple[Path, ModelsResult]) -> None:
    warehouse, result = clean_build
    artifacts = warehouse.with_name("warehouse.dbt")
    assert artifacts_dir(location_of(warehouse)) == artifacts
    run_results = json.loads((artifacts / "run_results.json").read_text())
    statuses = {item["unique_id"]: item["status"] for item in run_results["results"]}
    assert statuses["model.diligence.answers"] == "success"
    assert len([uid for uid in statuses if uid.startswith("model.")]) == len(result.timings)
    manifest = json.loads((artifacts / "manifest.json").read_text())
    assert "model.diligence.answers" in manifest["nodes"]
    compiled = artifacts / "compiled" / "diligence" / "models" / "marts" / "answers.sql"
    ran = artifacts / "run" / "diligence" / "models" / "marts" / "answers.sql"
    assert compiled.read_text().startswith("-- analytics.answers") and "{{" not in compiled.read_text()
    assert 'create  table\n      "warehouse"."analytics"."answers__build' in ran.read_text()
    assert (artifacts / "dbt.log").is_file()
    assert _mode(artifacts) == 0o700
    assert all(_mode(path) == 0o600 for path in artifacts.rglob("*") if path.is_file())
    assert not list(warehouse.parent.glob(".warehouse.dbt.*"))  # no build folder left


def test_a_failing_model_names_the_sql_that_ran_with_the_caret(
        clean_warehouse: Path, tmp_path: Path) -> None:
    project = _project_with(tmp_path, {"broken.sql": "select\n    no_such_column\nfrom {{ ref('answers') }}"})
    artifacts = clean_warehouse.with_name("warehouse.dbt")
    (artifacts / "compiled").mkdir(parents=True)
    (artifacts / "compiled" / "from-the-previous-build.sql").write_text("select 1")
    with pytest.raises(ModelError) as raised:
        build_models(clean_warehouse, project_dir=project)
    first, line, caret = str(raised.value).splitlines()
    ran = artifacts / "run" / "diligence" / "models" / "custom" / "broken.sql"
    assert first.startswith('model analytics.broken failed: Binder Error: Referenced column "no_such_column"')
    assert first.endswith(f"(SQL: {ran})")
    assert raised.value.sql_path == ran
    sql_lines = ran.read_text().splitlines()
    number = int(line.split(":")[0].removeprefix("LINE "))
    assert "no_such_column" in sql_lines[number - 1] and "no_such_column" in line
    assert caret.strip() == "^" and line[caret.index("^"):].startswith("no_such_column")
    # the failed build's artifacts replaced the previous build's
    assert not (artifacts / "compiled" / "from-the-previous-build.sql").exists()
    results = json.loads((artifacts / "run_results.json").read_text())["results"]
    assert {r["unique_id"]: r["status"] for r in results}["model.diligence.broken"] == "error"


def test_dbt_state_selection_compares_with_the_last_build(clean_build: tuple[Path, ModelsResult],
                                                          tmp_path: Path) -> None:
    warehouse, _ = clean_build
    state = tmp_path / "state"
    shutil.copytree(warehouse.with_name("warehouse.dbt"), state)
    project = _project_with(tmp_path, {})

    def modified() -> set[str]:
        run = invoke(["ls", "--select", "state:modified+", "--state", str(state),
                      "--resource-type", "model", "--output", "name"],
                     location_of(warehouse), project_dir=project, read_only=True)
        assert run.success, run.error
        return set(run.result)

    assert modified() == set()
    document_expiry = project / "models" / "marts" / "document_expiry.sql"
    document_expiry.write_text(document_expiry.read_text() + "\n-- changed\n")
    forget_parse(project)  # this process parsed the copy before the change
    assert modified() == {"document_expiry"} | _children_of("document_expiry", state)


def _children_of(name: str, state: Path) -> set[str]:
    """The models downstream of `name` in the manifest at `state`."""
    manifest = json.loads((state / "manifest.json").read_text())
    children, todo = set(), [f"model.diligence.{name}"]
    while todo:
        for child in manifest["child_map"].get(todo.pop(), []):
            if child.startswith("model.") and child.split(".")[-1] not in children:
                children.add(child.split(".")[-1])
                todo.append(child)
    return children


def test_the_analysts_guide_names_the_artifacts() -> None:
    guide = (PROJECT_DIR.parent / "docs" / "analysts.md").read_text()
    for name in ("run_results.json", "manifest.json", "dbt.log", "data/warehouse.dbt/",
                 "--state ../data/warehouse.dbt"):
        assert name in guide


def test_the_cli_prints_the_failing_line_and_its_caret(
        clean_warehouse: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = _project_with(tmp_path, {"broken.sql": "select\n    no_such_column\nfrom {{ ref('answers') }}"})
    real = analytics.build_models
    monkeypatch.setattr(analytics, "build_models", lambda *a, **k: real(*a, **k, project_dir=project))
    result = run(["models", "-w", clean_warehouse.name], clean_warehouse.parent)
    assert result.returncode == 1
    first, line, caret = result.stderr.splitlines()
    assert first == ('error: model analytics.broken failed: Binder Error: Referenced column '
                     '"no_such_column" not found in FROM clause! (SQL: warehouse.dbt/run/diligence/'
                     'models/custom/broken.sql)')
    assert re.fullmatch(r"LINE \d+:\s+no_such_column", line)
    assert caret.strip() == "^" and line[caret.index("^"):] == "no_such_column"
