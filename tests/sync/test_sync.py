"""The sync engine against the sandbox: counts, reruns, history, denials, failures."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from diligence.sync import SyncError
from flows.retry import is_transient
from sandbox import edits
from sandbox.server import SandboxServer
from tests.helpers import copy_warehouse, current_counts, query, sync


def test_counts_match_ground_truth(sandbox: SandboxServer, warehouse: Path) -> None:
    result = sync(sandbox, warehouse)
    truth = sandbox.world.truth()

    assert not result.failed
    counts = current_counts(warehouse)
    for ns in truth["namespaces"]:
        expected = truth["per_namespace"][ns]
        assert counts["connections"][ns] == expected["connections"]
        # the namespace's own company plus every connection (endpoint 4 answers for all)
        assert counts["companies"][ns] == expected["connections"] + 1
        assert counts["questionnaires"][ns] == expected["questionnaire_count"]
        assert counts["documents"][ns] == expected["documents"]["total"]
        assert counts["questionnaire_templates"][ns] == len(expected["template_type_ids"])
        outcome = next(o for o in result.namespaces if o.namespace_company_id == ns)
        assert outcome.requests == expected["expected_requests"]
    assert result.requests == truth["expected_requests"] - 1  # user-info is not per namespace

    # every row carries its namespace and the sync time
    for table in ("user_roles", "companies", "connections", "questionnaires", "documents"):
        assert query(
            warehouse,
            f"select count(*) from raw.{table} where namespace_company_id is null or synced_at is null",
        ) == [(0,)]
    # the forms land exactly as the service sent them, as JSON text
    (answered,) = query(
        warehouse,
        "select count(*) from raw.questionnaires, "
        "unnest(cast(json_extract(forms_json, '$[*].fields[*]') as json[])) as f(field) "
        "where json_exists(field, '$.information')",
    )[0]
    assert answered == truth["totals"]["answered_fields"]


def test_rerun_adds_no_rows(
    sandbox: SandboxServer, warehouse: Path, synced_small: Path
) -> None:
    copy_warehouse(synced_small, warehouse)  # the first sync of this world
    before = current_counts(warehouse)
    versions = query(warehouse, "select (select count(*) from raw.questionnaires), (select count(*) from raw.documents)")
    sync(sandbox, warehouse)
    assert current_counts(warehouse) == before
    assert query(warehouse, "select (select count(*) from raw.questionnaires), (select count(*) from raw.documents)") == versions
    assert query(warehouse, "select count(distinct sync_id) from raw.sync_runs") == [(2,)]
    # dlt's record of its schema keeps its newest version, not one per namespace per sync
    for dataset in ("raw", "raw_staging"):
        assert query(warehouse, f"select schema_name, count(*) from {dataset}._dlt_version group by all"
                     ) == [("company_connections", 1)]
    sync(sandbox, warehouse)  # and dlt loads on from it
    assert current_counts(warehouse) == before


def test_changes_are_kept_as_history(
    sandbox: SandboxServer, warehouse: Path, synced_small: Path
) -> None:
    ns = sandbox.world.namespaces[0]
    company_id, type_id = sandbox.world.readable_pairs(ns)[0]
    field_id = next(
        field["id"]
        for form in sandbox.world.questionnaire(company_id, type_id)["questionnaires"]["forms"]
        for field in form["fields"]
        if field["type"] == "Input"
    )
    copy_warehouse(synced_small, warehouse)  # the first sync of this world
    edits.set_answer(sandbox.world, company_id, type_id, field_id, {"value": "changed in the sandbox"})
    document = sandbox.world.documents(company_id, type_id)[0]
    edits.delete_document(sandbox.world, document["id"])
    sync(sandbox, warehouse)

    versions = query(
        warehouse,
        "select count(*), count(_dlt_valid_to) from raw.questionnaires "
        "where company_id = ? and company_type_id = ?",
        company_id,
        type_id,
    )
    # every namespace that reads this questionnaire now has an old and a new version
    readers = sum(
        (company_id, type_id) in map(tuple, sandbox.world.truth()["per_namespace"][n]["questionnaires"])
        for n in sandbox.world.namespaces
    )
    assert versions == [(2 * readers, readers)]
    assert query(
        warehouse,
        "select count(*) from raw.documents where document_id = ? and _dlt_valid_to is null",
        document["id"],
    ) == [(0,)]
    assert query(
        warehouse, "select count(*) from raw.documents where document_id = ?", document["id"]
    )[0][0] >= 1


def test_not_found_connection_detail_is_a_sync_issue(
    sandbox: SandboxServer, warehouse: Path, synced_small: Path
) -> None:
    copy_warehouse(synced_small, warehouse)  # the first sync of this world
    truth = sandbox.world.truth()
    for ns in truth["namespaces"]:
        missing = truth["per_namespace"][ns]["detail_404"]
        rows = query(
            warehouse,
            "select company_id, http_status from raw.sync_issues "
            "where namespace_company_id = ? and endpoint = 'connection'",
            ns,
        )
        assert sorted(rows) == sorted((company, 404) for company in missing)
        # the connection stays listed, without detail
        assert query(
            warehouse,
            "select has_detail from raw.connections where namespace_company_id = ? and company_id = ?",
            ns,
            missing[0],
        ) == [(False,)]


def test_drift_data_loads(warehouse: Path) -> None:
    with SandboxServer(scale="small", drift=True) as server:
        result = sync(server, warehouse)
        truth = server.world.truth()
    assert not result.failed
    counts = current_counts(warehouse)
    for ns in truth["namespaces"]:
        assert counts["documents"][ns] == truth["per_namespace"][ns]["documents"]["total"]
    assert query(warehouse, "select count(*) from raw.documents where expiration_date is null")[0][0] > 0
    kinds = {
        row[0]
        for row in query(
            warehouse,
            "select distinct field->>'type' from raw.questionnaires, "
            "unnest(cast(json_extract(forms_json, '$[*].fields[*]') as json[])) as f(field)",
        )
    }
    assert kinds - {"Label", "Input", "Dropdown", "Checkbox"}, "unknown field types are kept"


def test_wrong_password_fails_with_one_clear_error(sandbox: SandboxServer, warehouse: Path) -> None:
    with pytest.raises(SyncError) as caught:
        sync(sandbox, warehouse, settings={"password": "not-the-password"})
    message = str(caught.value)
    assert "401" in message or "credentials" in message.lower() or "rejected" in message.lower()
    assert "not-the-password" not in message
    assert "\n" not in message.strip()


def test_unreachable_service_fails_clearly(warehouse: Path) -> None:
    with pytest.raises(SyncError) as caught:
        run_unreachable(warehouse)
    assert "127.0.0.1:9" in str(caught.value) or "connect" in str(caught.value).lower()
    assert is_transient(caught.value)  # the service may come back: a flow tries again


def test_a_bug_in_a_sync_stays_itself_and_is_not_retried(
    sandbox: SandboxServer, warehouse: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import diligence.sync as engine

    def broken(*_args: object, **_kwargs: object) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr(engine, "count_commit", broken)
    with pytest.raises(KeyError) as caught:  # not a SyncError: the CLI shows its --debug hint
        sync(sandbox, warehouse)
    assert not is_transient(caught.value)


def run_unreachable(warehouse: Path) -> None:
    from diligence.sync import run_sync, source_settings

    run_sync(warehouse, source_settings(base_url="http://127.0.0.1:9", email="a@b.c", password="x", max_attempts=2))


def test_unknown_namespace_fails_the_sync_naming_the_valid_ones_and_records_nothing(
    sandbox: SandboxServer, warehouse: Path, synced_small: Path
) -> None:
    copy_warehouse(synced_small, warehouse)
    before = query(warehouse, "select * from raw.sync_runs order by all")
    ns = sandbox.world.namespaces[0]
    for typo in ("00000000-0000-4000-8000-000000000000", "not a uuid; drop"):
        with pytest.raises(SyncError) as caught:
            sync(sandbox, warehouse, namespaces=[ns, typo])
        assert str(caught.value) == (
            f"unknown namespace {typo!r}: not one of the user's companies and never synced into "
            f"this warehouse; user-info lists: {', '.join(sandbox.world.namespaces)}"
        )
        assert not is_transient(caught.value)  # a mistake: never retried
    # nothing read, nothing recorded: freshness and status never show the typo
    assert query(warehouse, "select * from raw.sync_runs order by all") == before


def test_failing_namespace_is_not_committed_and_keeps_its_data(
    sandbox: SandboxServer, warehouse: Path, synced_small: Path
) -> None:
    copy_warehouse(synced_small, warehouse)  # the first sync of this world
    before = current_counts(warehouse)
    failing, healthy = sandbox.world.namespaces
    sandbox.faults.fail_namespaces = [failing]
    company_id, type_id = sandbox.world.readable_pairs(healthy)[0]
    doc = sandbox.world.documents(company_id, type_id)[0]
    edits.delete_document(sandbox.world, doc["id"])

    result = sync(sandbox, warehouse, settings={"max_attempts": 2})

    assert [o.namespace_company_id for o in result.failed] == [failing]
    assert "500" in (result.failed[0].error or "") or "failed" in (result.failed[0].error or "")
    after = current_counts(warehouse)
    for table in before:
        assert after[table][failing] == before[table][failing], table
    # the healthy namespace was loaded: the deleted document's version has ended
    assert after["documents"][healthy] == before["documents"][healthy] - 1
    assert query(
        warehouse, "select status from raw.sync_runs where namespace_company_id = ? order by synced_at", failing
    ) == [("success",), ("failed",)]
    # the request that failed for good is a sync issue of this sync
    failed_requests = query(
        warehouse,
        "select http_status from raw.sync_issues where namespace_company_id = ? and sync_id = ?",
        failing,
        result.sync_id,
    )
    assert failed_requests and all(status >= 500 for (status,) in failed_requests)


def test_denied_questionnaire_is_a_sync_issue_and_ends_its_version(
    sandbox: SandboxServer, warehouse: Path, synced_small: Path
) -> None:
    ns = sandbox.world.namespaces[0]
    company_id, type_id = next(
        (c, t) for c, t in sandbox.world.readable_pairs(ns) if c != ns
    )
    copy_warehouse(synced_small, warehouse)  # the first sync of this world
    sandbox.faults.deny_pairs = [[company_id, type_id]]
    result = sync(sandbox, warehouse)
    assert not result.failed
    issues = query(
        warehouse,
        "select endpoint, http_status from raw.sync_issues where namespace_company_id = ? "
        "and company_id = ? and company_type_id = ? and sync_id = ?",
        ns,
        company_id,
        type_id,
        result.sync_id,
    )
    assert sorted(issues) == [("documents", 403), ("questionnaire", 403)]
    assert query(
        warehouse,
        "select count(*) from raw.questionnaires where namespace_company_id = ? and company_id = ? "
        "and company_type_id = ? and _dlt_valid_to is null",
        ns,
        company_id,
        type_id,
    ) == [(0,)]


def test_token_expiring_mid_run_is_renewed(warehouse: Path) -> None:
    with SandboxServer(scale="small") as server:
        server.faults.token_lifetime = 2
        server.faults.latency_ms = 40
        result = sync(server, warehouse, settings={"max_concurrency": 4})
        stats = httpx.get(f"{server.base_url}/_sandbox/stats").json()
    assert not result.failed
    assert result.timings["extract"] > 2, "the run must outlive the first token"
    renewals = stats["by_endpoint"].get("2", {})
    assert sum(renewals.values()) >= 1
    # no request ever failed for good: every namespace loaded completely
    assert len(result.namespaces) == 2
