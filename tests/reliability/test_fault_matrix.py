"""The fault matrix: every fault the sandbox can inject, and what the warehouse looks like after.

Each row ends in one of two outcomes:

* **clean**: the warehouse is identical to a clean run's (same current rows, same
  versions), and the run reports no failed namespace; or
* **refused**: the run names what failed, nothing of that namespace is committed,
  and its previous data is intact.

`docs/reliability.md` reports the same matrix.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from diligence.sync import SyncResult
from sandbox import edits
from sandbox.server import SandboxServer
from tests.helpers import copy_warehouse, queries, query, sync

pytestmark = pytest.mark.slow

#: One sandbox day for the whole module: its document dates are relative to `today`, so a
#: run that crosses midnight would otherwise compare two different worlds.
TODAY = datetime.now(timezone.utc).date()

STATE_SQL = {
    "user_roles": "select namespace_company_id, internal_company_type_ids::varchar from raw.user_roles",
    "companies": "select namespace_company_id, company_id, name, country, city, lei, cin, is_namespace_company from raw.companies where _dlt_valid_to is null",
    "connections": "select namespace_company_id, company_id, name, country, given_company_type_ids::varchar, received_company_type_ids::varchar, has_detail from raw.connections where _dlt_valid_to is null",
    "templates": "select namespace_company_id, company_type_id, md5(forms_json) from raw.questionnaire_templates",
    "questionnaires": "select namespace_company_id, company_id, company_type_id, content_hash, _dlt_valid_to is null from raw.questionnaires",
    "documents": "select namespace_company_id, company_id, company_type_id, document_id, content_hash, _dlt_valid_to is null from raw.documents",
}


def state(warehouse: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Everything the sync landed, minus sync times and dlt's ids: comparable across runs."""
    return {name: sorted(rows, key=repr) for name, rows in queries(warehouse, STATE_SQL).items()}


@pytest.fixture(scope="module")
def clean_synced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A warehouse of one clean sync of the module's sandbox world (read-only: the rows
    that first sync a warehouse copy it)."""
    warehouse = tmp_path_factory.mktemp("clean") / "warehouse.duckdb"
    with SandboxServer(scale="small", today=TODAY) as server:
        result = sync(server, warehouse)
    assert not result.failed
    return warehouse


@pytest.fixture(scope="module")
def clean_state(clean_synced: Path) -> dict[str, list[tuple[Any, ...]]]:
    return state(clean_synced)


def _stats(server: SandboxServer) -> dict[str, Any]:
    return httpx.get(f"{server.base_url}/_sandbox/stats").json()


# -- rows whose outcome is "clean" -------------------------------------------------------
CLEAN_ROWS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # name: (sandbox fault switches, source options)
    "5xx bursts": ({"error_rate": 0.2}, {"backoff_initial": 0.01}),
    "429 storms with Retry-After": ({"rate_limit": 60}, {}),
    "latency spikes and timeouts": ({"slow_rate": 0.05, "slow_ms": 2500}, {"request_timeout": 0.5, "backoff_initial": 0.01}),
    "connection resets": ({"reset_rate": 0.15}, {"backoff_initial": 0.01}),
    "malformed and truncated JSON": ({"malformed_rate": 0.15}, {"backoff_initial": 0.01}),
    "token expiring mid-run": ({"token_lifetime": 2, "latency_ms": 40}, {"max_concurrency": 4}),
    "token storm (every token revoked after 40 uses)": (
        {"revoke_after_uses": 40}, {"max_concurrency": 16}),
}


@pytest.mark.parametrize("row", list(CLEAN_ROWS))
def test_fault_row_ends_like_a_clean_run(
    row: str, warehouse: Path, clean_state: dict[str, list[tuple[Any, ...]]]
) -> None:
    faults, options = CLEAN_ROWS[row]
    with SandboxServer(scale="small", today=TODAY) as server:
        server.faults.update(faults)
        result = sync(server, warehouse, settings={"max_attempts": 8, **options})
        injected = _stats(server)
    assert not result.failed, [o.error for o in result.failed]
    assert state(warehouse) == clean_state
    if row == "token expiring mid-run":
        assert sum(injected["by_endpoint"].get("2", {}).values()) >= 1
    elif row.startswith("token storm"):
        revoked = injected["injected"]["token_revoked"]
        logins = sum(injected["by_endpoint"]["1"].values())
        assert revoked >= 5, revoked
        assert revoked <= logins <= revoked + 1, (revoked, logins)  # one re-login per revocation
    else:
        assert sum(injected["injected"].values()) > 0, f"{row}: no fault was injected"


def test_token_invalidated_mid_run_by_another_process(
    warehouse: Path, clean_state: dict[str, list[tuple[Any, ...]]]
) -> None:
    """Another process renews the token (which invalidates ours) while we sync."""
    with SandboxServer(scale="small", today=TODAY) as server:
        server.faults.latency_ms = 20

        def renew_elsewhere() -> None:
            while _stats(server)["total"] < 100:
                time.sleep(0.01)
            server.invalidate_tokens()

        other = threading.Thread(target=renew_elsewhere)
        other.start()
        result = sync(server, warehouse, settings={"max_concurrency": 4})
        other.join(timeout=30)
        logins = _stats(server)["by_endpoint"].get("1", {})
    assert not result.failed
    assert sum(logins.values()) == 2, "exactly one re-login after the invalidation"
    assert state(warehouse) == clean_state


def test_schema_drift_loads_everything(warehouse: Path) -> None:
    with SandboxServer(scale="small", today=TODAY, drift=True) as server:
        result = sync(server, warehouse)
        truth = server.world.truth()
    assert not result.failed
    for ns in truth["namespaces"]:
        (documents,) = query(
            warehouse,
            "select count(*) from raw.documents where namespace_company_id = ? and _dlt_valid_to is null",
            ns,
        )[0]
        assert documents == truth["per_namespace"][ns]["documents"]["total"]


# -- rows whose outcome is authoritative absence or "refused" ------------------------------
def _first_sync(clean_synced: Path, warehouse: Path) -> dict[str, list[tuple[Any, ...]]]:
    """The first sync of `warehouse` (a sandbox of the module's world): a copy of the
    module's clean sync."""
    copy_warehouse(clean_synced, warehouse)
    return state(warehouse)


def _rows_of(snapshot: dict[str, list[tuple[Any, ...]]], ns: str) -> dict[str, list[tuple[Any, ...]]]:
    return {name: [r for r in rows if r[0] == ns] for name, rows in snapshot.items()}


def test_403_and_404_on_child_requests_end_only_those_items(warehouse: Path, clean_synced: Path) -> None:
    with SandboxServer(scale="small", today=TODAY) as server:
        before = _first_sync(clean_synced, warehouse)
        ns = server.world.namespaces[0]
        pairs = [(c, t) for c, t in server.world.readable_pairs(ns) if c != ns]
        denied = pairs[0]
        dropped = next(c for c, _ in pairs if c != denied[0])
        server.faults.deny_pairs = [list(denied)]
        edits.remove_connection(server.world, ns, dropped)  # not listed any more
        result = sync(server, warehouse)
    assert not result.failed
    issues = query(
        warehouse,
        "select endpoint, company_id, company_type_id, http_status from raw.sync_issues where sync_id = ?",
        result.sync_id,
    )
    assert ("questionnaire", denied[0], denied[1], 403) in issues
    assert ("documents", denied[0], denied[1], 403) in issues
    after = state(warehouse)
    current = {(r[0], r[1], r[2]) for r in after["questionnaires"] if r[4]}
    assert (ns, *denied) not in current
    assert not any(r[1] == dropped for r in after["connections"] if r[0] == ns)
    assert not any(r[1] == dropped for r in after["questionnaires"] if r[0] == ns and r[4])
    # everything else of that namespace is as before
    untouched = {
        (r[0], r[1], r[2])
        for r in before["questionnaires"]
        if r[0] == ns and (r[1], r[2]) != denied and r[1] != dropped
    }
    assert untouched <= current


def test_empty_namespace_retires_its_rows(warehouse: Path, clean_synced: Path) -> None:
    with SandboxServer(scale="small", today=TODAY) as server:
        before = _first_sync(clean_synced, warehouse)
        emptied, other = server.world.namespaces
        edits.empty_namespace(server.world, emptied)
        result = sync(server, warehouse)
    assert not result.failed
    after = state(warehouse)
    assert _rows_of(after, other) == _rows_of(before, other)
    assert [r for r in after["connections"] if r[0] == emptied] == []
    assert [r for r in after["questionnaires"] if r[0] == emptied and r[5 - 1]] == []
    assert [r for r in after["documents"] if r[0] == emptied and r[5]] == []
    # history is kept: the retired versions are still there
    assert len([r for r in after["questionnaires"] if r[0] == emptied]) == len(
        [r for r in before["questionnaires"] if r[0] == emptied]
    )


def _refused(
    warehouse: Path, clean_synced: Path, change: Callable[[SandboxServer, str], None], words: str
) -> tuple[SyncResult, dict[str, list[tuple[Any, ...]]], dict[str, list[tuple[Any, ...]]], str]:
    with SandboxServer(scale="small", today=TODAY) as server:
        before = _first_sync(clean_synced, warehouse)
        failing = server.world.namespaces[0]
        change(server, failing)
        result = sync(server, warehouse, settings={"max_attempts": 2, "backoff_initial": 0.01})
    assert [o.namespace_company_id for o in result.failed] == [failing]
    assert words in (result.failed[0].error or "")
    return result, before, state(warehouse), failing


def test_namespace_whose_requests_keep_failing_is_not_committed(warehouse: Path, clean_synced: Path) -> None:
    def fail(server: SandboxServer, ns: str) -> None:
        server.faults.fail_namespaces = [ns]

    _, before, after, failing = _refused(warehouse, clean_synced, fail, "500")
    assert _rows_of(after, failing) == _rows_of(before, failing)


def test_namespace_the_user_lost_access_to(warehouse: Path, clean_synced: Path) -> None:
    def revoke(server: SandboxServer, ns: str) -> None:
        edits.revoke_namespace(server.world, ns)

    _, before, after, failing = _refused(warehouse, clean_synced, revoke, "no longer lists")
    assert _rows_of(after, failing) == _rows_of(before, failing)
