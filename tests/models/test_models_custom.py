"""Analysts' own models in sql/models/custom/ build with ours, ref() our marts, and a
failing one stops the build like one of ours."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from diligence.analytics.checks import check_names
from diligence.analytics.dbt import PROJECT_DIR, forget_parse
from diligence.analytics.models import build_models
from diligence.errors import ModelError

from .helpers import rows, scalar

CUSTOM_README = PROJECT_DIR / "models" / "custom" / "README.md"
ANALYSTS_GUIDE = PROJECT_DIR.parent / "docs" / "analysts.md"


def _project_with(tmp_path: Path, models: dict[str, str]) -> Path:
    """A copy of sql/ with `models` added under models/custom/, as an analyst adds them to
    a checkout that has been parsed before: with the checkout's parse (dbt's partial
    parse file), so dbt parses only what changed."""
    project = tmp_path / "sql"
    shutil.copytree(PROJECT_DIR, project, ignore=shutil.ignore_patterns("target", "logs"))
    for parsed in (PROJECT_DIR / "target").glob("diligence-*/partial_parse.msgpack"):
        copy = project / parsed.relative_to(PROJECT_DIR)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(parsed, copy)
    for name, sql in models.items():
        (project / "models" / "custom" / name).write_text(sql, encoding="utf-8")
    return project


def _readme_example(readme: Path = CUSTOM_README) -> tuple[str, str]:
    """The custom model shown in `readme`: the first SQL block naming a file under
    models/custom/."""
    text = readme.read_text(encoding="utf-8")
    for sql in re.findall(r"```sql\n(.*?)```", text, re.S):
        named = re.search(r"models/custom/(\w+\.sql)", sql)
        if named:
            return named.group(1), sql
    raise AssertionError(f"no custom model example in {readme}")


def test_the_analysts_guide_shows_the_example_that_is_tested() -> None:
    """docs/analysts.md shows the same model as sql/models/custom/README.md (below the
    comment naming its path), so the guide's example is the one that builds."""
    guide_name, guide_sql = _readme_example(ANALYSTS_GUIDE)
    name, sql = _readme_example()
    assert guide_name == name
    assert guide_sql.split("\n", 1)[1] == sql.split("\n", 1)[1]


def test_the_readme_example_builds_with_our_models(clean_warehouse: Path, tmp_path: Path) -> None:
    name, sql = _readme_example()
    project = _project_with(tmp_path, {name: sql})
    result = build_models(clean_warehouse, project_dir=project)
    table = name.removesuffix(".sql")
    assert f"analytics.{table}" in result.row_counts
    expected = scalar(
        clean_warehouse,
        "select count(distinct company_id) from analytics.document_expiry "
        "where expiry_status in ('expired', 'expiring')",
    )
    assert expected > 0
    assert scalar(clean_warehouse, f"select count(*) from analytics.{table}") == expected
    assert result.checks and all(r.passed for r in result.checks)


def test_a_failing_custom_model_names_itself_and_keeps_analytics(
    clean_warehouse: Path, tmp_path: Path
) -> None:
    published = ("select table_name from duckdb_tables() where schema_name = 'analytics' "
                 "and not ends_with(table_name, '__build') order by 1")
    before = rows(clean_warehouse, published)
    project = _project_with(tmp_path, {"broken.sql": "select no_such_column from {{ ref('answers') }}"})
    with pytest.raises(ModelError) as raised:
        build_models(clean_warehouse, project_dir=project)
    assert raised.value.model_name == "analytics.broken"
    assert "no_such_column" in str(raised.value)
    assert rows(clean_warehouse, published) == before
    # beside them only the incremental models' tables, which the next build extends
    kept = rows(clean_warehouse, "select table_name from duckdb_tables() where schema_name = 'analytics' "
                "and ends_with(table_name, '__build') order by 1")
    assert [row["table_name"] for row in kept] == [
        f"{name}__build" for name in sorted(
            ("answer_history", "answer_changes", "document_history", "connection_history", "changes"))]


def test_a_failing_check_runs_with_the_build_and_skips_no_model(
        clean_warehouse: Path, tmp_path: Path) -> None:
    """The build runs the checks on the new build (one `dbt build`): a check that fails
    on an early model is reported with its rows, and every model after it still
    builds and is swapped in."""
    project = _project_with(tmp_path, {
        "late.sql": "select count(*) as questionnaires from {{ ref('answers_wide') }}",
    })
    (project / "tests" / "sync_runs__never_true.sql").write_text(
        "select * from {{ ref('sync_runs') }}", encoding="utf-8")
    result = build_models(clean_warehouse, project_dir=project)
    failed = [check for check in result.checks if not check.passed]
    assert [check.name for check in failed] == ["sync_runs__never_true"]
    assert failed[0].failing_rows == scalar(clean_warehouse, "select count(*) from analytics.sync_runs")
    assert len(result.checks) == len(check_names()) + 1
    assert "analytics.late" in result.row_counts and "analytics.answers_wide" in result.row_counts


def test_a_removed_model_leaves_analytics_with_the_next_build(
        clean_warehouse: Path, tmp_path: Path) -> None:
    project = _project_with(tmp_path, {"extra.sql": "select 1 as one"})
    assert "analytics.extra" in build_models(clean_warehouse, project_dir=project).row_counts
    (project / "models" / "custom" / "extra.sql").unlink()
    forget_parse(project)  # this process parsed the project with the model in it
    result = build_models(clean_warehouse, project_dir=project)
    tables = rows(clean_warehouse, "select table_name from information_schema.tables "
                  "where table_schema = 'analytics'")
    assert "analytics.extra" not in result.row_counts
    assert {row["table_name"] for row in tables if not row["table_name"].endswith("__build")} == {
        name.split(".")[1] for name in result.row_counts}


def test_every_configuration_path_of_the_project_has_models() -> None:
    """dbt warns about a configuration path with no model ("unused configuration paths")
    on every command: each folder the project configures holds a model."""
    import yaml

    project = yaml.safe_load((PROJECT_DIR / "dbt_project.yml").read_text(encoding="utf-8"))
    folders = [name for name in project["models"]["diligence"] if not name.startswith("+")]
    assert folders and all(list((PROJECT_DIR / "models" / name).rglob("*.sql")) for name in folders), folders
