"""The CLI conveniences of data engineers, each through the `diligence` command (in this
process, :func:`helpers.run`): status --json, sync --json-summary, check, --select,
--quiet/--verbose, --password-stdin."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox import edits
from sandbox.server import SandboxServer
from tests.helpers import query

from .helpers import CREDENTIALS, EMAIL, SECRET, SyncedFolder, error_lines, run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def synced(synced_folder: SyncedFolder, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """This module's copy of the warehouse synced once with --json-summary; its summary."""
    warehouse = synced_folder.copy(tmp_path_factory.mktemp("synced"))
    return warehouse, json.loads((warehouse.parent / "run.json").read_text())


# -- sync --json-summary -------------------------------------------------------------------
def test_json_summary_counts_what_the_service_and_the_warehouse_saw(
    server: SandboxServer, synced: tuple[Path, dict], synced_folder: SyncedFolder
) -> None:
    warehouse, summary = synced
    assert summary["version"] == 1 and summary["status"] == "success"
    overall = summary["overall"]
    assert overall["namespaces"] == len(server.world.namespaces) == len(summary["namespaces"])
    # every request of the run is accounted for: the sandbox counted the same attempts
    runs = dict(query(warehouse, "select namespace_company_id, requests from raw.sync_runs"))
    for ns in summary["namespaces"]:
        assert ns["requests"] == runs[ns["namespace_company_id"]]
        assert ns["attempts"] >= ns["requests"] and ns["retries"] == 0 and ns["throttled_429"] == 0
        assert sum(ns["rows_per_table"].values()) == ns["rows"]
        assert ns["duration_seconds"] > 0 and ns["status"] == "success" and ns["error"] is None
    assert overall["requests"] == sum(runs.values())
    assert overall["attempts"] == overall["requests"] + 2  # + login and user-info
    assert overall["logins"] == 1
    documents = query(warehouse, "select count(*) from raw.documents where _dlt_valid_to is null")[0][0]
    assert summary["rows_per_table"]["documents"] == documents
    assert summary["models"]["row_counts"]["analytics.answers"] > 0 and summary["models"]["failed_checks"] == []
    text = json.dumps(summary)
    assert SECRET not in text and "eyJ" not in text and synced_folder.base_url not in text


def test_json_summary_counts_retries_and_429s(server: SandboxServer, tmp_path: Path) -> None:
    server.faults.update({"rate_limit": 40.0})
    try:
        result = run(
            ["sync", "--base-url", server.base_url, "-w", "w.duckdb", "--no-models",
             "--json-summary", "run.json", "--max-concurrency", "8"],
            tmp_path, {**CREDENTIALS, "SOURCES__COMPANY_CONNECTIONS__MAX_ATTEMPTS": "30"},
        )
    finally:
        server.faults.update({"rate_limit": 0.0})
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "run.json").read_text())
    overall = summary["overall"]
    assert overall["throttled_429"] > 0 and overall["retries"] > 0
    assert overall["throttled_429"] == sum(ns["throttled_429"] for ns in summary["namespaces"])
    assert overall["retries"] >= sum(ns["retries"] for ns in summary["namespaces"]) > 0
    assert overall["attempts"] == overall["requests"] + 2 + overall["retries"]


# -- status --json ------------------------------------------------------------------------
def test_status_json_has_stable_keys_and_true_counts(synced: tuple[Path, dict]) -> None:
    warehouse, summary = synced
    result = run(["status", "--json", "-w", str(warehouse)], warehouse.parent)
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout)
    assert set(status) == {
        "warehouse", "state", "sync_running", "syncs", "namespaces", "row_counts",
        "open_sync_issues", "open_sync_issues_total", "failed_attempts", "resumable", "evidence", "changes",
    }
    assert status["changes"] == {"sync_id": summary["sync_id"], "total": 0, "counts": {}}  # a first sync
    assert status["state"] == "ready" and status["sync_running"] is None
    assert status["resumable"] == []
    evidence = status["evidence"]
    assert set(evidence) == {"path", "head", "syncs", "responses", "bytes"}
    assert evidence["head"] == summary["evidence"]["head"] and evidence["syncs"] == 1
    assert evidence["path"] == str(warehouse.with_name(warehouse.stem + ".evidence"))
    last = status["syncs"][0]
    assert last["sync_id"] == summary["sync_id"]
    assert last["namespaces_ok"] == summary["overall"]["namespaces"] and last["namespaces_failed"] == 0
    assert last["requests"] == summary["overall"]["requests"]
    assert {n["namespace_company_id"] for n in status["namespaces"]} == {
        n["namespace_company_id"] for n in summary["namespaces"]
    }
    assert all(n["last_status"] == "success" and n["age_seconds"] >= 0 for n in status["namespaces"])
    assert status["row_counts"]["analytics.answers"] == query(warehouse, "select count(*) from analytics.answers")[0][0]
    assert status["row_counts"]["raw.documents.current"] == summary["rows_per_table"]["documents"]
    issues = query(warehouse, "select count(*) from analytics.sync_issues")[0][0]
    assert status["open_sync_issues_total"] == issues == sum(i["count"] for i in status["open_sync_issues"])


# -- check ----------------------------------------------------------------------------------
def test_check_reports_reading_rights_and_writes_nothing(server: SandboxServer, tmp_path: Path) -> None:
    result = run(["check", "--base-url", server.base_url], tmp_path, CREDENTIALS)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"ok  base URL {server.base_url}"
    assert lines[1].startswith("ok  credentials accepted")
    for ns in server.world.namespaces:
        listed = len(server.world.connection_list(ns))
        line = next(line for line in lines if ns in line)
        assert f"{listed} connections" in line
        pairs = len(server.world.readable_pairs(ns))
        assert f"({pairs} questionnaires" in line
    assert lines[-1].startswith(f"ready: {len(server.world.namespaces)} namespaces")
    assert list(tmp_path.iterdir()) == []  # no warehouse, no pipeline folder, nothing
    assert SECRET not in result.stdout + result.stderr


def test_check_fails_in_one_line(server: SandboxServer, tmp_path: Path) -> None:
    wrong = run(["check", "--base-url", server.base_url], tmp_path,
                {**EMAIL, "SOURCES__COMPANY_CONNECTIONS__PASSWORD": "wrong-" + SECRET})
    assert wrong.returncode == 1
    assert len(error_lines(wrong.stderr)) == 1 and "login rejected" in wrong.stderr
    assert "Traceback" not in wrong.stderr and SECRET not in wrong.stderr
    unknown = run(["check", "--base-url", server.base_url, "-n", "no-such-company"], tmp_path, CREDENTIALS)
    assert unknown.returncode == 1 and "no-such-company is not one of the user's companies" in unknown.stderr
    unreachable = run(["check", "--base-url", "http://127.0.0.1:9"], tmp_path,
                      {**CREDENTIALS, "SOURCES__COMPANY_CONNECTIONS__MAX_ATTEMPTS": "1"})
    assert unreachable.returncode == 1 and len(error_lines(unreachable.stderr)) == 1
    missing = run(["check"], tmp_path, CREDENTIALS)
    assert missing.returncode == 2 and "SOURCES__COMPANY_CONNECTIONS__BASE_URL" in missing.stderr
    assert list(tmp_path.iterdir()) == []


# -- --password-stdin ---------------------------------------------------------------------------
def test_password_from_stdin_logs_in_and_is_never_echoed(server: SandboxServer, tmp_path: Path) -> None:
    ok = run(["check", "--base-url", server.base_url, "--password-stdin"], tmp_path, EMAIL, stdin=SECRET + "\n")
    assert ok.returncode == 0, ok.stderr
    assert SECRET not in ok.stdout + ok.stderr
    synced = run(["-v", "sync", "--base-url", server.base_url, "-w", "w.duckdb", "--no-models", "--password-stdin"],
                 tmp_path, EMAIL, stdin=SECRET + "\n")
    assert synced.returncode == 0, synced.stderr
    assert SECRET not in synced.stdout + synced.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    wrong = run(["check", "--base-url", server.base_url, "--password-stdin"], tmp_path, EMAIL, stdin="nope\n")
    assert wrong.returncode == 1 and "login rejected" in wrong.stderr
    empty = run(["check", "--base-url", server.base_url, "--password-stdin"], tmp_path, EMAIL, stdin="")
    assert empty.returncode == 2 and "empty password" in empty.stderr


# -- --quiet / --verbose ---------------------------------------------------------------------------
def test_quiet_prints_one_line_and_verbose_shows_progress(server: SandboxServer, tmp_path: Path) -> None:
    quiet = run(["--quiet", "sync", "--base-url", server.base_url, "-w", "w.duckdb"], tmp_path, CREDENTIALS)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    assert len(quiet.stdout.splitlines()) == 1
    assert quiet.stdout.startswith(f"synced {len(server.world.namespaces)}/{len(server.world.namespaces)} namespaces")
    verbose = run(["--verbose", "sync", "--base-url", server.base_url, "-w", "w.duckdb", "--no-models"],
                  tmp_path, CREDENTIALS)
    assert verbose.returncode == 0, verbose.stderr
    for ns in server.world.namespaces:
        assert f"namespace {ns} loaded" in verbose.stderr
    assert "DEBUG diligence.client" in verbose.stderr  # each request of our client
    assert SECRET not in verbose.stderr and "eyJ" not in verbose.stderr
    assert "Bearer ***" in verbose.stderr or "Bearer" not in verbose.stderr
    exported = run(["-q", "export", "-w", "w.duckdb", "--out", "out"], tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert exported.stdout.splitlines() == ["exported 5 reports (csv) into out"]
    assert len(list((tmp_path / "out").iterdir())) == 5
    both = run(["-q", "-v", "status"], tmp_path)
    assert both.returncode == 2


# -- --select ---------------------------------------------------------------------------------
def test_select_loads_only_the_chosen_resources_and_retires_nothing_else(
    tmp_path: Path,
) -> None:
    with SandboxServer(scale="small", password=SECRET) as sandbox:
        args = ["sync", "--base-url", sandbox.base_url, "-w", "w.duckdb", "--no-models"]
        first = run(args, tmp_path, CREDENTIALS)
        assert first.returncode == 0, first.stderr
        world = sandbox.world
        ns = world.namespaces[0]
        gone = world.connection_list(ns)[0]["id"]
        edits.remove_connection(world, ns, gone)  # would end the connection and its data
        kept_company, kept_type = next(p for p in world.readable_pairs(ns) if p[0] != gone)
        deleted = world.documents(kept_company, kept_type)[0]["id"]
        edits.delete_document(world, deleted)  # a selected resource's change

        def current(table: str, where: str = "true") -> int:
            return query(tmp_path / "w.duckdb",
                         f"select count(*) from raw.{table} where _dlt_valid_to is null and {where}")[0][0]

        before = {t: current(t) for t in ("companies", "connections", "questionnaires")}
        selective = run([*args, "--select", "documents"], tmp_path, CREDENTIALS)
        assert selective.returncode == 0, selective.stderr
        assert "(only documents)" in selective.stdout
        # the unselected resources are untouched: the removed connection is still current
        assert {t: current(t) for t in before} == before
        assert current("connections", f"company_id = '{gone}' and namespace_company_id = '{ns}'") == 1
        # the selected one did update: the deleted document's version ended
        assert current("documents", f"document_id = '{deleted}'") == 0
        # and a full sync does retire the connection (the selective one chose not to)
        full = run(args, tmp_path, CREDENTIALS)
        assert full.returncode == 0, full.stderr
        assert current("connections", f"company_id = '{gone}' and namespace_company_id = '{ns}'") == 0


def test_select_validates_names(tmp_path: Path) -> None:
    result = run(["sync", "--base-url", "http://127.0.0.1:9", "-w", "w.duckdb", "--select", "documents,answerz"],
                 tmp_path, CREDENTIALS)
    assert result.returncode == 2
    (line,) = error_lines(result.stderr)
    assert "answerz" in line
    for name in ("user_roles", "questionnaire_templates", "companies", "connections", "questionnaires", "documents"):
        assert name in line
    assert not (tmp_path / "w.duckdb").exists()


def test_select_needs_a_first_full_sync(tmp_path: Path) -> None:
    result = run(["sync", "--base-url", "http://127.0.0.1:9", "-w", "w.duckdb", "--select", "documents"],
                 tmp_path, CREDENTIALS)
    assert result.returncode == 2 and "full sync first" in result.stderr


def test_help_lists_the_conveniences(tmp_path: Path) -> None:
    top = run(["-h"], tmp_path)
    assert "check" in top.stdout and "--quiet" in top.stdout and "--verbose" in top.stdout
    sync_help = run(["sync", "-h"], tmp_path)
    for option in ("--select", "--json-summary", "--password-stdin"):
        assert option in sync_help.stdout
    assert "--json" in run(["status", "-h"], tmp_path).stdout


# -- hints keep the options that were given ------------------------------------------------
def test_hints_name_the_warehouse_that_was_given(server: SandboxServer, tmp_path: Path) -> None:
    synced = run(["sync", "--base-url", server.base_url, "-w", "my data/w.duckdb", "--no-models"],
                 tmp_path, CREDENTIALS)
    assert synced.returncode == 0, synced.stderr
    assert "models not built (--no-models): `diligence models --warehouse 'my data/w.duckdb'` builds them" \
        in synced.stdout
    changes = run(["changes", "-w", "my data/w.duckdb"], tmp_path)
    assert changes.returncode == 2
    assert "run `diligence models --warehouse 'my data/w.duckdb'` (or a sync) first" in changes.stderr
    missing = run(["status", "-w", "elsewhere.duckdb"], tmp_path)
    assert missing.returncode == 2
    assert "run `diligence sync --warehouse elsewhere.duckdb` first" in missing.stderr
