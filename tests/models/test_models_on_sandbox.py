"""The models on what a real sync of the sandbox lands: the flattened answers against
the sandbox's ground truth (with drift), and one story of two syncs with changes in
between, built after each as a user's runs build them: the first build under a tight
memory bound, then the history marts, answer_changes, freshness and the example
queries after the second.

(Connections removed upstream and reading rights withdrawn need the scd2 raw
`connections` of the sync engine; test_models_lifecycle covers them on a hand-built raw
layer of that shape. One build over both syncs at once, and an extended build equal to
it, are test_models_lifecycle's and test_models_incremental's.)
"""

from __future__ import annotations

from pathlib import Path

from diligence.analytics.models import build_models
from diligence.report.export import export_reports
from diligence.warehouse import MODELS_THREADS, Warehouse
from sandbox import edits
from sandbox.server import SandboxServer
from tests.helpers import copy_warehouse, query, sync

from .test_models_examples import EXAMPLES


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


def _first_build_within_its_memory_bound(warehouse: Path) -> None:
    """The first build of a sync of the small sandbox, under a bound scaled down to the
    small profile's size. With one DuckDB thread per core the answer models' working sets
    outgrew it (as 160 MB on the `large` profile did, out of memory); under the bound one
    thread spills instead. Two models build at a time (dbt's threads) and which two
    overlap varies from run to run: the bound keeps a margin over the 48-56 MB the first
    build (history marts in full) needs."""
    owner = Warehouse(warehouse)
    with owner.writing():
        result = build_models(owner, memory_limit="64MB", duckdb_threads=MODELS_THREADS)
        assert result.checks and all(check.passed for check in result.checks)
    assert result.row_counts["analytics.answer_history"] > 0


def test_two_syncs_of_the_sandbox(sandbox: SandboxServer, warehouse: Path, synced_small: Path) -> None:
    world = sandbox.world
    ns = world.namespaces[0]
    company_id, type_id = next(
        (c, t) for c, t in world.readable_pairs(ns) if c != ns and len(world.documents(c, t)) >= 2
    )
    form, field = next(
        (form, f)
        for form in world.questionnaire(company_id, type_id)["questionnaires"]["forms"]
        for f in form["fields"]
        if f["type"] == "Input" and f.get("information")
    )
    copy_warehouse(synced_small, warehouse)  # the first sync of this world
    [(first_synced_at,)] = query(warehouse, "select distinct synced_at from raw.questionnaires")
    _first_build_within_its_memory_bound(warehouse)
    assert query(warehouse, "select count(*) from analytics.answer_changes") == [(0,)]

    kept, deleted = world.documents(company_id, type_id)[:2]
    edits.set_answer(world, company_id, type_id, field["id"], {"value": "Revised answer"})
    edits.update_document(world, kept["id"], set_fields={"expirationDate": "31/02/2027"})
    edits.delete_document(world, deleted["id"])
    second = sync(sandbox, warehouse)
    built = build_models(warehouse)
    assert built.checks and [c.name for c in built.checks if not c.passed] == []

    [change] = query(
        warehouse,
        "select company_name, form_label, field_label, old_answer_text, new_answer_text, "
        "change_type, changed_at from analytics.answer_changes "
        "where namespace_company_id = ? and company_id = ? and field_id = ?",
        ns,
        company_id,
        field["id"],
    )
    assert change[0]  # a name, also for a company whose details were not read
    assert change[1:6] == (
        form["label"],
        field["label"],
        field["information"]["value"],
        "Revised answer",
        "changed",
    )
    assert change[6] == second.synced_at
    # the same company read by other namespaces changes there too, and nothing else changed
    readers = sum(
        (company_id, type_id) in {tuple(p) for p in world.readable_pairs(n)} for n in world.namespaces
    )
    assert query(warehouse, "select count(*) from analytics.answer_changes") == [(readers,)]

    documents = dict(
        (document_id, (versions, end_reasons))
        for document_id, versions, end_reasons in query(
            warehouse,
            "select document_id, count(*), list(end_reason order by valid_from) "
            "from analytics.document_history where namespace_company_id = ? and company_id = ? "
            "and company_type_id = ? group by 1",
            ns,
            company_id,
            type_id,
        )
    )
    assert documents[deleted["id"]] == (1, ["removed"])
    assert documents[kept["id"]] == (2, ["changed", None])
    [(status, text)] = query(
        warehouse,
        "select expiry_status, expiration_date_text from analytics.document_expiry "
        "where namespace_company_id = ? and document_id = ?",
        ns,
        kept["id"],
    )
    assert (status, text) == ("invalid_date", "31/02/2027")

    # freshness: two successful syncs per namespace; every current row was confirmed by
    # the second, even those whose content dates from the first
    freshness = query(
        warehouse,
        "select namespace_company_id, successful_sync_count, last_status, last_success_at "
        "from analytics.freshness order by 1",
    )
    assert [(n, count, status) for n, count, status, _ in freshness] == [
        (n, 2, "success") for n in sorted(world.namespaces)
    ]
    assert all(last >= second.synced_at for *_, last in freshness)
    stale = query(
        warehouse,
        "select count(*) from analytics.answers join analytics.freshness using "
        "(namespace_company_id) where answers.synced_at <> freshness.last_success_at",
    )
    assert stale == [(0,)]
    old_content = query(
        warehouse, "select count(*) from analytics.answers where versioned_at = ?", first_synced_at
    )
    assert old_content[0][0] > 0

    for example in sorted(EXAMPLES.glob("*.sql")):
        con_rows = query(warehouse, example.read_text(encoding="utf-8"))
        assert con_rows, example.name
