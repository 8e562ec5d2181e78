"""Sync the sandbox, build the models, and compare with the sandbox's ground truth."""

from __future__ import annotations

from pathlib import Path

from diligence.analytics.models import build_models
from diligence.report.export import export_reports
from diligence.warehouse import MODELS_THREADS, Warehouse
from sandbox import edits
from sandbox.server import SandboxServer
from tests.helpers import copy_warehouse, query, sync


def test_flattened_answers_match_ground_truth_with_drift(warehouse: Path, tmp_path: Path) -> None:
    with SandboxServer(scale="small", drift=True) as server:
        sync(server, warehouse)
        truth = server.world.truth()
    built = build_models(warehouse)

    for ns in truth["namespaces"]:
        expected = truth["per_namespace"][ns]
        answerable, answered, questionnaires = query(
            warehouse,
            "select sum(answerable_fields), sum(answered_fields), count(*) "
            "from analytics.questionnaire_completeness where namespace_company_id = ?",
            ns,
        )[0]
        assert (answerable, answered) == (expected["answerable_fields"], expected["answered_fields"])
        assert questionnaires == expected["questionnaire_count"]
        (multi,) = query(
            warehouse,
            "select count(*) from analytics.answers where namespace_company_id = ? "
            "and field_type = 'Checkbox' and len(selected_option_ids) > 1",
            ns,
        )[0]
        assert multi == expected["checkbox_multi"]
        types = dict(
            query(
                warehouse,
                "select field_type, count(*) from analytics.answers where namespace_company_id = ? group by 1",
                ns,
            )
        )
        expected_types = {k: v for k, v in expected["field_types"].items() if k != "Label"}
        assert types == expected_types
    # unknown field types pass through with their answers
    unknown = query(
        warehouse,
        "select count(*) from analytics.answers "
        "where field_type not in ('Input', 'Dropdown', 'Checkbox') and is_answered and answer_text is not null",
    )[0][0]
    assert unknown > 0
    assert built.checks and [c for c in built.checks if not c.passed] == []

    for fmt in ("csv", "parquet"):
        with Warehouse(warehouse).session(read_only=True, memory_limit=None) as con:
            files = export_reports(con, tmp_path / fmt, fmt)  # type: ignore[arg-type]
        for exported in files:
            (rows,) = query(warehouse, f"select count(*) from analytics.{exported.report}")[0]
            assert exported.rows == rows


def test_changed_answer_shows_up_in_answer_changes(
    sandbox: SandboxServer, warehouse: Path, synced_small: Path
) -> None:
    ns = sandbox.world.namespaces[0]
    company_id, type_id = next((c, t) for c, t in sandbox.world.readable_pairs(ns) if c != ns)
    field = next(
        f
        for form in sandbox.world.questionnaire(company_id, type_id)["questionnaires"]["forms"]
        for f in form["fields"]
        if f["type"] == "Input" and f.get("information")
    )
    copy_warehouse(synced_small, warehouse)  # the first sync of this world
    build_models(warehouse)
    assert query(warehouse, "select count(*) from analytics.answer_changes") == [(0,)]

    edits.set_answer(sandbox.world, company_id, type_id, field["id"], {"value": "Revised answer"})
    result = sync(sandbox, warehouse)
    build_models(warehouse)

    changes = query(
        warehouse,
        "select old_answer_text, new_answer_text, changed_at from analytics.answer_changes "
        "where namespace_company_id = ? and company_id = ? and field_id = ?",
        ns,
        company_id,
        field["id"],
    )
    assert len(changes) == 1
    old, new, changed_at = changes[0]
    assert (old, new) == (field["information"]["value"], "Revised answer")
    assert changed_at == result.synced_at
    # the same company read by other namespaces changes there too, and nothing else changed
    readers = sum(
        (company_id, type_id) in {tuple(p) for p in sandbox.world.readable_pairs(n)}
        for n in sandbox.world.namespaces
    )
    assert query(warehouse, "select count(*) from analytics.answer_changes") == [(readers,)]


def test_the_models_fit_their_memory_bound_by_spilling(warehouse: Path, synced_small: Path) -> None:
    # The bound is scaled down to the small profile's size. With one DuckDB thread per
    # core the answer models' working sets outgrew it (as 160 MB on the `large` profile
    # did, out of memory); under the bound one thread spills instead. Two models build at
    # a time (dbt's threads) and which two overlap varies from run to run: the bound
    # keeps a margin over the 48-56 MB the first build (history marts in full) needs.
    copy_warehouse(synced_small, warehouse)  # a sync of the small sandbox
    owner = Warehouse(warehouse)
    with owner.writing():
        result = build_models(owner, memory_limit="64MB", duckdb_threads=MODELS_THREADS)
        assert result.checks and all(check.passed for check in result.checks)
    assert result.row_counts["analytics.answer_history"] > 0
