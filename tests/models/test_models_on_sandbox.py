"""Two syncs of the sandbox with changes in between: the history marts, answer_changes,
freshness and the example queries on what a real sync lands.

(Connections removed upstream and reading rights withdrawn need the scd2 raw
`connections` of the sync engine; test_models_lifecycle covers them on a hand-built raw
layer of that shape.)
"""

from __future__ import annotations

from pathlib import Path

from diligence.analytics.models import build_models
from sandbox import edits
from sandbox.server import SandboxServer
from tests.helpers import query, sync

from .test_models_examples import EXAMPLES


def test_two_syncs_of_the_sandbox(sandbox: SandboxServer, warehouse: Path) -> None:
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
    first = sync(sandbox, warehouse)
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
        warehouse, "select count(*) from analytics.answers where versioned_at = ?", first.synced_at
    )
    assert old_content[0][0] > 0

    for example in sorted(EXAMPLES.glob("*.sql")):
        con_rows = query(warehouse, example.read_text(encoding="utf-8"))
        assert con_rows, example.name
