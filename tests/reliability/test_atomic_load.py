"""A namespace commits whole or not at all: `kill -9` at several points inside the load
phase, with the data changed upstream between the syncs (answers revised, connections
removed, documents' expiry moved, documents removed). After each kill the rerun gives
exactly what the uninterrupted sequence gives, table for table, history included (its
models compared where a namespace had committed before the kill; where none had, raw
is the first sync's again, so the rerun's raw is compared and its models not built).

The kill points are exact statements of the loads (:mod:`tests.reliability.killpoint`):
early in the first namespace's load, its documents' history merge, its ``sync_runs``
row, dlt's record of the load (the last statement before the commit), and right after
the first namespace's commit, before its manifest records it; then the second
namespace's, after the first committed.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from diligence.audit.verify import verify_warehouse
from diligence.warehouse import Warehouse
from sandbox import edits
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.cli.helpers import run
from tests.helpers import copy_warehouse, queries
from tests.processes import REPO

pytestmark = pytest.mark.slow

CREDENTIALS = {"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
               "SOURCES__COMPANY_CONNECTIONS__PASSWORD": DEFAULT_PASSWORD}

#: What must be equal, table for table, with the ids and times of syncs left out (a rerun
#: syncs later than the uninterrupted sequence) and the number of requests (a rerun
#: answers what the killed sync fetched from its manifest).
FINGERPRINT = {
    "raw.companies": "select namespace_company_id, company_id, content_hash, _dlt_valid_to is null "
                     "from raw.companies order by all",
    "raw.connections": "select namespace_company_id, company_id, content_hash, _dlt_valid_to is null "
                       "from raw.connections order by all",
    "raw.questionnaires": "select namespace_company_id, company_id, company_type_id, content_hash, "
                          "_dlt_valid_to is null from raw.questionnaires order by all",
    "raw.documents": "select namespace_company_id, document_id, content_hash, _dlt_valid_to is null "
                     "from raw.documents order by all",
    "raw.questionnaire_templates": "select namespace_company_id, company_type_id, md5(forms_json) "
                                   "from raw.questionnaire_templates order by all",
    "raw.user_roles": "select namespace_company_id, internal_company_type_ids, external_company_type_ids "
                      "from raw.user_roles order by all",
    "raw.sync_runs": "select namespace_company_id, status, rows_loaded, issues from raw.sync_runs order by all",
    "raw.sync_issues": "select namespace_company_id, endpoint, company_id, company_type_id, http_status "
                       "from raw.sync_issues order by all",
    "raw._dlt_loads": "select count(*) from raw._dlt_loads where status = 0",
    "analytics.document_history": "select namespace_company_id, company_id, document_id, change_type, "
                                  "end_reason, is_current from analytics.document_history order by all",
    "analytics.connection_history": "select namespace_company_id, company_id, change_type, end_reason, "
                                    "is_current from analytics.connection_history order by all",
    "analytics.answer_changes": "select namespace_company_id, company_id, field_id, change_type, "
                                "old_answer_text, new_answer_text from analytics.answer_changes order by all",
    "analytics.answers": "select namespace_company_id, company_id, company_type_id, field_id, answer_text "
                         "from analytics.answers order by all",
    "analytics.freshness": "select namespace_company_id, last_status, successful_sync_count, "
                           "failed_sync_count from analytics.freshness order by all",
}

#: where the second sync is killed (see tests.reliability.killpoint): namespace 1, then 2
KILL_POINTS = [
    "3:",                             # early: dlt's checks of the schema, in namespace 1's load
    '1:UPDATE "raw"."documents"',     # its documents' history merge (copies and other merges done)
    '1:"raw"."sync_runs"',            # its sync_runs row
    '1:"_dlt_loads"',                 # dlt's record of the load: the last statement before the commit
    "after-commit:1",                 # namespace 1 committed, its manifest does not say so yet
    '2:UPDATE "raw"."documents"',     # the same in namespace 2, after namespace 1 committed
    '2:"raw"."sync_runs"',
    '2:"_dlt_loads"',
]


def change_upstream(server: SandboxServer) -> None:
    """Between the syncs: answers revised, a connection removed in each namespace,
    documents' expiry moved, a document removed."""
    world = server.world
    for ns in world.namespaces:
        pairs = [(c, t) for c, t in world.readable_pairs(ns) if c != ns]
        company, type_id = pairs[0]
        fields = [f for form in world.questionnaire(company, type_id)["questionnaires"]["forms"]
                  for f in form["fields"] if f.get("type") == "Input"]
        for field in fields[:2]:
            edits.set_answer(world, company, type_id, field["id"], {"value": f"revised {field['id']}"})
        for document in world.documents(*pairs[1])[:2]:
            edits.update_document(world, document["id"], set_fields={"expirationDate": "2031-01-31T00:00:00"})
        if documents := world.documents(*pairs[2]):
            edits.delete_document(world, documents[0]["id"])
        removed = next(c for c, _ in reversed(pairs) if c != company)
        edits.remove_connection(world, ns, removed)


def sync_cli(server: SandboxServer, warehouse: Path, *options: str) -> None:
    done = run(["sync", "--base-url", server.base_url, "-w", str(warehouse), *options], warehouse.parent,
               CREDENTIALS)
    assert done.returncode == 0, done.stderr[-3000:]


def fingerprint(warehouse: Path) -> dict[str, list[tuple[Any, ...]]]:
    return queries(warehouse, FINGERPRINT)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The first sync's warehouse, the sandbox changed since, and what the second sync of
    the uninterrupted sequence gives."""
    folder = tmp_path_factory.mktemp("atomic")
    first = folder / "first" / "w.duckdb"
    first.parent.mkdir()
    with SandboxServer(scale="small") as server:
        sync_cli(server, first)
        change_upstream(server)
        reference = copy_warehouse(first, folder / "reference" / "w.duckdb")
        sync_cli(server, reference)
        yield server, first, fingerprint(reference)


def raw_of(tables: dict[str, list[tuple[Any, ...]]]) -> dict[str, list[tuple[Any, ...]]]:
    return {name: rows for name, rows in tables.items() if name.startswith("raw.")}


def kill_second_sync(server: SandboxServer, warehouse: Path, point: str) -> None:
    """The second sync as a process, killed at `point` inside its load: with
    ``--no-models``, since it never gets to the models (its load is the same either way,
    and the parse dbt would make meanwhile costs about 5 CPU s); the rerun builds them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DILIGENCE_"))}
    killed = subprocess.run(
        [sys.executable, "-m", "tests.reliability.killpoint", point, "--", "sync", "--base-url",
         server.base_url, "-w", str(warehouse), "--max-concurrency", "4", "--no-models"],
        cwd=REPO, env=env | CREDENTIALS, capture_output=True, text=True, timeout=300,
    )
    assert killed.returncode == -signal.SIGKILL, (point, killed.stderr[-3000:])


@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_kill_inside_the_load_then_a_rerun_equals_the_uninterrupted_sequence(
    world: Any, point: str, tmp_path: Path
) -> None:
    server, first, reference = world
    warehouse = copy_warehouse(first, tmp_path / "w.duckdb")
    before = fingerprint(warehouse)
    kill_second_sync(server, warehouse, point)
    # nothing of the namespace being loaded is in: raw is the first sync's, or has the
    # namespaces committed before the kill, each whole
    after_kill = queries(warehouse, {"runs": "select namespace_company_id, count(*) from raw.sync_runs "
                                             "group by all order by all"})["runs"]
    committed = 1 if point.startswith(("2:", "after-commit")) else 0
    assert [count for _, count in after_kill] in ([1, 1], [1 + committed, 1], [1, 1 + committed])
    assert sum(count for _, count in after_kill) == 2 + committed, after_kill
    if committed == 0:
        assert raw_of(fingerprint(warehouse)) == raw_of(before)
        # raw is the first sync's, as the uninterrupted sequence's second sync found it,
        # so the models a rerun builds on it are those of the uninterrupted sequence: the
        # rerun of a kill after a commit (below) is the one whose models are compared
        sync_cli(server, warehouse, "--no-models")
        assert raw_of(fingerprint(warehouse)) == raw_of(reference)
    else:
        sync_cli(server, warehouse)
        assert fingerprint(warehouse) == reference
    assert not list(tmp_path.rglob("*.manifest")), "an unsealed manifest was left"
    verified = verify_warehouse(Warehouse(warehouse))
    assert verified.ok, verified.problems
    shutil.rmtree(tmp_path / ".dlt-pipelines", ignore_errors=True)
