"""`diligence verify` on a warehouse: a clean history verifies in one line; each kind of
tampering is named in its own exact line (exit 1); a head kept elsewhere is checked; a
sync on a broken chain says so and records it; pruned syncs are pruned, not tampered."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import shutil
from datetime import timedelta
from pathlib import Path

import duckdb
import orjson

from diligence.audit.prune import prune_evidence
from diligence.evidence.chain import parse_time, read_store
from diligence.warehouse import Warehouse
from pipelines.evidence.manifest import read_manifest
from sandbox import edits
from sandbox.server import SandboxServer
from tests.cli.helpers import CREDENTIALS, SECRET, run
from tests.helpers import copy_warehouse

VERIFIED = re.compile(r"^verified 2 syncs, [\d,]+ responses, [\d,]+ rows; head ([0-9a-f]{64})$")


def change_an_answer(server: SandboxServer, company: str, company_type: str) -> None:
    """Give the first question (not a label) of a questionnaire another answer."""
    forms = server.world.questionnaire(company, company_type)["questionnaires"]["forms"]
    field = next(f["id"] for form in forms for f in form["fields"] if f["type"] != "Label")
    edits.set_answer(server.world, company, company_type, field, {"value": "changed between syncs"})


def _copy(history: Path, tmp_path: Path) -> Path:
    return copy_warehouse(history, tmp_path / "w.duckdb")


def _store(warehouse: Path) -> Path:
    return warehouse.with_name("w.evidence")


def _verify(warehouse: Path, *extra: str) -> tuple[int, list[str], str]:
    result = run(["verify", "-w", str(warehouse), *extra], warehouse.parent)
    return result.returncode, result.stderr.splitlines(), result.stdout


def _failures(warehouse: Path, *extra: str) -> list[str]:
    """The error lines of a `verify` that failed (exit code 1)."""
    code, errors, _ = _verify(warehouse, *extra)
    assert code == 1, errors
    return errors


def _sealed(warehouse: Path) -> list[Path]:
    return sorted((_store(warehouse) / "syncs").glob("*.manifest.gz"))


def test_a_clean_history_verifies_in_one_line_with_the_head_of_status(history: Path, tmp_path: Path) -> None:
    warehouse = _copy(history, tmp_path)
    code, errors, output = _verify(warehouse)
    assert (code, errors) == (0, [])
    [line] = output.splitlines()
    match = VERIFIED.match(line)
    assert match, line
    status = json.loads(run(["status", "-w", str(warehouse), "--json"], tmp_path).stdout)
    evidence = status["evidence"]
    assert evidence["head"] == match.group(1)
    assert evidence["path"] == str(_store(warehouse)) and evidence["syncs"] == 2
    assert evidence["responses"] > 100 and evidence["bytes"] > 10_000


def test_a_row_edited_is_named_with_its_table_key_and_response(history: Path, tmp_path: Path) -> None:
    warehouse = _copy(history, tmp_path)
    con = duckdb.connect(str(warehouse))
    ns, company, since, sha = con.execute(
        "select namespace_company_id, company_id, _dlt_valid_from, response_sha256 from raw.companies "
        "where _dlt_valid_to is null order by company_id limit 1").fetchone()
    con.execute("update raw.companies set name = 'Someone Else Ltd' where namespace_company_id = ? "
                "and company_id = ? and _dlt_valid_to is null", [ns, company])
    con.close()
    errors = _failures(warehouse)
    assert errors == [f"raw.companies namespace {ns} company {company} (version from {since.isoformat()}) was "
                      f"edited: name differs from its response {sha[:12]}"]


def test_a_response_altered_is_named_by_its_hash(history: Path, tmp_path: Path) -> None:
    warehouse = _copy(history, tmp_path)
    path = sorted((_store(warehouse) / "responses").rglob("*.gz"))[3]
    body = gzip.decompress(path.read_bytes()).replace(b'"', b"'", 1)
    path.write_bytes(gzip.compress(body))
    errors = _failures(warehouse)
    assert errors == [f"response {path.name.removesuffix('.gz')} was altered: its bytes hash to "
                      f"{hashlib.sha256(body).hexdigest()}"]


def test_a_response_deleted_is_named_with_the_sync_and_request_that_read_it(history: Path, tmp_path: Path) -> None:
    warehouse = _copy(history, tmp_path)
    path = sorted((_store(warehouse) / "responses").rglob("*.gz"))[5]
    sha = path.name.removesuffix(".gz")
    path.unlink()
    first = next(m for m in map(read_manifest, _sealed(warehouse)) if m and any(e.sha256 == sha for e in m.entries))
    entry = next(e for e in first.entries if e.sha256 == sha)
    errors = _failures(warehouse)
    assert errors == [f"response {sha} of sync {first.sync_id} (GET {entry.path}) is missing"]


def test_a_manifest_edited_is_named_by_its_sync(history: Path, tmp_path: Path) -> None:
    warehouse = _copy(history, tmp_path)
    first = _sealed(warehouse)[0]
    document = orjson.loads(gzip.decompress(first.read_bytes()))
    document["outcomes"] = []  # as if no namespace had been committed
    first.write_bytes(gzip.compress(orjson.dumps(document)))
    errors = _failures(warehouse)
    sync_id = first.name.removesuffix(".manifest.gz")
    assert errors == [f"the manifest of sync {sync_id} was edited: its content does not hash to its seal"]


def test_a_manifests_table_of_entries_altered_is_named(history: Path, tmp_path: Path) -> None:
    warehouse = _copy(history, tmp_path)
    first = _sealed(warehouse)[0]
    table = orjson.loads(gzip.decompress(first.read_bytes()))["entries"]
    path = _store(warehouse) / "entries" / table[:2] / f"{table}.gz"
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes()).replace(b"200", b"404", 1)))
    errors = _failures(warehouse)
    assert errors[0] == (f"the manifest of sync {first.name.removesuffix('.manifest.gz')}: its table of "
                         f"entries {table} was altered")


def test_a_manifest_removed_is_named_by_the_sync_after_it(history: Path, tmp_path: Path) -> None:
    warehouse = _copy(history, tmp_path)
    first, second = _sealed(warehouse)
    removed = read_manifest(first)
    assert removed is not None and removed.seal is not None
    first.unlink()
    errors = _failures(warehouse)
    assert errors[0] == (f"the manifest sealed before {second.name.removesuffix('.manifest.gz')} is missing "
                         f"(hash {removed.seal['hash'][:12]})")
    # the answer that changed: its first version was read by the removed sync only
    assert any(line.startswith("raw.questionnaires ") and line.endswith("is in no sealed manifest")
               for line in errors[1:]), errors


def test_the_last_manifest_removed_is_named_by_head(history: Path, tmp_path: Path) -> None:
    warehouse = _copy(history, tmp_path)
    last = _sealed(warehouse)[-1]
    last.unlink()
    errors = _failures(warehouse)
    head = (_store(warehouse) / "syncs" / "HEAD").read_text().split()[0]
    assert errors[0] == (f"HEAD names sync {last.name.removesuffix('.manifest.gz')} ({head[:12]}), whose "
                         "manifest is missing")


def test_a_head_kept_elsewhere_is_checked(history: Path, tmp_path: Path) -> None:
    warehouse = _copy(history, tmp_path)
    first_hash = read_store(_store(warehouse)).ordered()[0].seal["hash"]  # type: ignore[index]
    assert _verify(warehouse, "--head", first_hash)[0] == 0  # an older head is in the chain too
    assert _verify(warehouse, "--head", first_hash[:12])[0] == 0
    errors = _failures(warehouse, "--head", "ab" * 32)
    assert errors == [f"the head kept elsewhere ({'ab' * 32}) is not in the chain: the chain was rewritten, "
                      "or its manifests removed"]


def test_more_than_twenty_problems_are_twenty_lines_and_a_count(history: Path, tmp_path: Path) -> None:
    warehouse = _copy(history, tmp_path)
    con = duckdb.connect(str(warehouse))
    con.execute("update raw.documents set category = 'edited'")
    edited = con.execute("select count(*) from raw.documents where response_sha256 is not null").fetchone()[0]
    con.close()
    errors = _failures(warehouse)
    assert edited > 20
    assert len(errors) == 21
    assert all(line.startswith("raw.documents ") and " was edited: category differs from its response " in line
               for line in errors[:20])
    assert errors[20] == f"... and {edited - 20} more problems"


def test_a_sync_on_a_broken_chain_says_so_in_one_line_and_records_it(
        server: SandboxServer, history: Path, tmp_path: Path) -> None:
    warehouse = _copy(history, tmp_path)
    last = _sealed(warehouse)[-1]
    last_id = last.name.removesuffix(".manifest.gz")
    head = (_store(warehouse) / "syncs" / "HEAD").read_text().split()[0]
    last.unlink()
    result = run(["sync", "--base-url", server.base_url, "-w", str(warehouse), "--no-models"], tmp_path, CREDENTIALS)
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "evidence chain is broken" in line]
    gone = f"the manifest of sync {last_id} ({head[:12]}) is missing"
    assert len(said) == 1 and gone in said[0]
    assert "the chain was broken before it (recorded: see `diligence verify`)" in result.stdout
    errors = _failures(warehouse)
    new = _sealed(warehouse)[-1].name.removesuffix(".manifest.gz")
    # the new sync extends the last seal left, and the break stays named
    assert f"the manifest of sync {new} was sealed on a broken chain (its seal records the break: {gone})" in errors


def test_pruned_syncs_are_reported_as_pruned_not_tampered(history: Path, tmp_path: Path) -> None:
    warehouse = _copy(history, tmp_path)
    _first, second = read_store(_store(warehouse)).ordered()
    responses = len(list((_store(warehouse) / "responses").rglob("*.gz")))
    between = parse_time(second.header["started_at"])
    assert between is not None
    result = prune_evidence(Warehouse(warehouse), 1.0, now=between + timedelta(days=1))
    assert result.syncs == 1 and result.responses >= 1  # the answer's first version
    assert len(list((_store(warehouse) / "responses").rglob("*.gz"))) == responses - result.responses
    code, errors, output = _verify(warehouse)
    assert (code, errors) == (0, [])
    # the sync kept, and the rows only the pruned one proved (the answer's first version)
    assert re.match(r"^verified 1 sync, [\d,]+ responses, [\d,]+ rows; head [0-9a-f]{64}; 1 row of "
                    r"pruned syncs \(not checked\)$", output.strip()), output
    # the prune is a sealed manifest of the chain, after the syncs
    assert read_store(_store(warehouse)).ordered()[-1].header["kind"] == "prune"


def test_prune_without_retain_days_is_a_usage_error(history: Path, tmp_path: Path) -> None:
    warehouse = _copy(history, tmp_path)
    result = run(["evidence", "prune", "-w", str(warehouse)], tmp_path)
    assert result.returncode == 2
    assert "nothing to prune: the evidence is kept for ever unless [evidence] retain_days" in result.stderr


def test_no_token_password_or_url_signature_is_kept(server: SandboxServer, tmp_path: Path) -> None:
    """Every file of the store, after a sync that downloads documents: the login and
    renewal answers (tokens) are never kept, nor the password, nor a signed URL's
    signature; each downloaded file is in a sealed manifest of its own."""
    warehouse = tmp_path / "w.duckdb"
    result = run(["sync", "--base-url", server.base_url, "-w", str(warehouse), "--no-models",
                  "--download-documents", str(tmp_path / "files")], tmp_path, CREDENTIALS)
    assert result.returncode == 0, result.stderr
    kinds = [read_manifest(p).header["kind"] for p in _sealed(warehouse)]  # type: ignore[union-attr]
    assert sorted(kinds) == ["documents", "sync"]
    for path in _store(warehouse).rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            text = gzip.decompress(data) if path.suffix == ".gz" else data
            assert SECRET.encode() not in text, path
            assert b"sig=" not in text and b"expires=" not in text, path
            assert b'"token"' not in text, path
    code, errors, output = _verify(warehouse)
    assert (code, errors) == (0, []), errors
    assert output.startswith("verified 2 syncs")
    shutil.rmtree(tmp_path / "files")
