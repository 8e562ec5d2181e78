"""An evidence store written by an adversary: every case ends with its one named line, a
non-zero exit, nothing written outside its target, a bounded peak RSS and no hang.

The store's names never become paths unchecked (a sync id with ``../``), no link or
special file is followed or opened (a symlink to ``/dev/zero``, a FIFO), no
decompression runs past the size the manifest records (a gzip bomb), every raw row is
accounted for (a NULL link, a deleted row), and the chain's head is derived from the
manifests (``HEAD`` behind, garbage in ``HEAD``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pipelines.evidence.manifest import Manifest
from pipelines.evidence.merkle import content_digest, manifest_hash
from sandbox.server import SandboxServer
from tests.cli.helpers import CREDENTIALS
from tests.evidence.hostile import (
    a_response,
    an_entries_table,
    gzip_bomb,
    read_sealed,
    run_bounded,
    sealed,
    snapshot,
    sql,
    store_of,
    write_sealed,
)

pytestmark = pytest.mark.timeout(120)


def _verify(warehouse: Path) -> list[str]:
    """The problems `diligence verify` names (exit 1), each case within its bounds."""
    before = snapshot(warehouse.parent.parent, besides=(warehouse.parent,))
    ran = run_bounded(["verify", "-w", str(warehouse)], warehouse.parent).bounded()
    assert ran.code == 1, (ran.out, ran.err)
    assert snapshot(warehouse.parent.parent, besides=(warehouse.parent,)) == before
    return ran.lines


def _resealed(path: Path, **header: object) -> None:
    """Rewrite the sealed manifest at `path` with `header` changed and its seal made
    to match again (what an adversary who can write the store can do)."""
    document = read_sealed(path)
    document["header"].update(header)
    seal = document["seal"]
    seal["content"] = content_digest(document["header"], document["outcomes"], seal["how"], seal.get("break"))
    seal["hash"] = manifest_hash(seal["previous"], seal["content"], seal["merkle"])
    write_sealed(path, document)


@pytest.mark.parametrize("target", ["../../outside/PWNED", "../../../w1/wh.evidence/syncs/20261126T000000000000Z"])
def test_a_sync_id_with_dotdot_is_never_a_path(warehouse: Path, tmp_path: Path, target: str) -> None:
    last = sealed(warehouse)[-1]
    _resealed(last, sync_id=target)
    before = snapshot(tmp_path, besides=(tmp_path / "new",))
    ran = run_bounded(["replay", "--evidence", str(store_of(warehouse)), "-w", str(tmp_path / "new" / "r.duckdb")],
                      tmp_path).bounded()
    assert ran.code != 0
    assert ran.lines == [f"error: the evidence chain of {store_of(warehouse)} does not hold (manifest {last.name} is "
                         f"not readable: its header names sync {target}, not "
                         f"{last.name.removesuffix('.manifest.gz')}): run `diligence verify` first"]
    assert snapshot(tmp_path, besides=(tmp_path / "new",)) == before
    assert not list(tmp_path.rglob("PWNED*")) and not (tmp_path / "w1").exists()
    assert f"manifest {last.name} is not readable" in " ".join(_verify(warehouse))


def _swap(path: Path, kind: str) -> None:
    """Put a symlink to /dev/zero, or a FIFO, where the file `path` was."""
    path.unlink()
    if kind == "symlink":
        os.symlink("/dev/zero", path)
    else:
        os.mkfifo(path)


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_response_that_is_a_link_or_a_fifo_is_named_never_read(warehouse: Path, kind: str) -> None:
    response = a_response(warehouse)
    _swap(response, kind)
    what = "a symbolic link" if kind == "symlink" else "a FIFO"
    relative = response.relative_to(store_of(warehouse))
    problems = _verify(warehouse)
    assert f"{relative} is {what}: not read" in problems
    assert any(p.startswith(f"response {response.name.removesuffix('.gz')} of sync ") and p.endswith(" is missing")
               for p in problems)


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_an_entries_table_that_is_a_link_or_a_fifo_is_named_never_read(warehouse: Path, kind: str) -> None:
    table = an_entries_table(warehouse)
    _swap(table, kind)
    what = "a symbolic link" if kind == "symlink" else "a FIFO"
    relative = table.relative_to(store_of(warehouse))
    problems = _verify(warehouse)
    assert any(f"its table of entries {table.name.removesuffix('.gz')} cannot be read: {relative} is {what}: "
               "not read" in p for p in problems), problems


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_manifest_that_is_a_link_or_a_fifo_is_named_never_read(warehouse: Path, kind: str) -> None:
    last = sealed(warehouse)[-1]
    _swap(last, kind)
    what = "a symbolic link" if kind == "symlink" else "a FIFO"
    problems = _verify(warehouse)
    assert f"syncs/{last.name} is {what}: not read" in problems


def test_a_gzip_bomb_for_a_response_stops_at_its_recorded_size(warehouse: Path) -> None:
    response = a_response(warehouse)
    gzip_bomb(response)
    sha = response.name.removesuffix(".gz")
    problems = _verify(warehouse)
    assert any(p.startswith(f"response {sha} is damaged: {response.relative_to(store_of(warehouse))} "
                            "decompresses to more than ") for p in problems), problems


def test_a_gzip_bomb_for_a_manifest_stops_at_the_cap(warehouse: Path) -> None:
    last = sealed(warehouse)[-1]
    gzip_bomb(last)
    problems = _verify(warehouse)
    assert f"manifest {last.name} is not readable: syncs/{last.name} decompresses to more than 268,435,456 " \
           "bytes: not read" in problems


def test_a_null_link_on_a_current_row_is_named(warehouse: Path) -> None:
    (ns, company, company_type), = sql(warehouse, (
        "update raw.questionnaires set response_sha256 = NULL where (namespace_company_id, company_id, "
        "company_type_id) in (select namespace_company_id, company_id, company_type_id from raw.questionnaires "
        "where _dlt_valid_to is null order by all limit 1) and _dlt_valid_to is null "
        "returning namespace_company_id, company_id, company_type_id"))
    problems = _verify(warehouse)
    assert any(p.startswith(f"raw.questionnaires namespace {ns} company {company} company_type {company_type} "
                            "(version from ") and " names no response (response_sha256 is NULL), though it is not "
               "older than the evidence (" in p for p in problems), problems


def test_a_deleted_row_is_named(warehouse: Path) -> None:
    (ns, synced_at), = sql(warehouse, (
        "delete from raw.documents where (namespace_company_id, document_id) in (select namespace_company_id, "
        "document_id from raw.documents order by all limit 1) returning namespace_company_id, _dlt_valid_from"))
    problems = _verify(warehouse)
    first = sealed(warehouse)[0].name.removesuffix(".manifest.gz")
    assert len(problems) == 1 and problems[0].startswith(f"raw.documents namespace {ns}: sync {first} inserted "), \
        (problems, synced_at)
    assert problems[0].endswith(" are there (1 deleted)") or problems[0].endswith(" is there (1 deleted)")


def test_a_row_added_by_hand_is_named(warehouse: Path) -> None:
    sql(warehouse, "insert into raw.documents select * from raw.documents order by all limit 1")
    problems = _verify(warehouse)
    assert any(p.startswith("raw.documents namespace ") and p.endswith("(1 added)") for p in problems), problems


def test_head_behind_the_last_seal_is_named_and_the_next_sync_extends_the_last_seal(
        warehouse: Path, server: SandboxServer) -> None:
    first, last = sealed(warehouse)
    first_hash = read_sealed(first)["seal"]["hash"]
    last_hash = read_sealed(last)["seal"]["hash"]
    first_id, last_id = (p.name.removesuffix(".manifest.gz") for p in (first, last))
    (store_of(warehouse) / "syncs" / "HEAD").write_text(f"{first_hash} {first_id}\n")
    assert _verify(warehouse) == [f"HEAD names sync {first_id} ({first_hash[:12]}), which is not the last seal: "
                                  f"sync {last_id} ({last_hash[:12]}) is sealed after it"]
    ran = run_bounded(["sync", "--base-url", server.base_url, "-w", str(warehouse), "--no-models"],
                      warehouse.parent, CREDENTIALS).bounded()
    assert ran.code == 0, ran.err
    assert "evidence chain is broken" not in ran.err
    newest = sealed(warehouse)[-1]
    assert read_sealed(newest)["seal"]["previous"] == last_hash  # the last seal, not what HEAD said
    verified = run_bounded(["verify", "-w", str(warehouse)], warehouse.parent).bounded()
    assert verified.code == 0, verified.err


@pytest.mark.parametrize("garbage", ["garbage\n", "", "a" * 64 + " ../../outside/x\n"])
def test_head_holding_garbage_is_named_as_such(warehouse: Path, garbage: str) -> None:
    head = store_of(warehouse) / "syncs" / "HEAD"
    head.write_text(garbage)
    problems = _verify(warehouse)
    held = f"not a head (it holds {garbage.strip()[:60]!r})" if garbage else "empty: it names no manifest"
    assert problems == [f"{head} is {held}"]


def test_a_stray_file_or_link_in_the_store_is_named(warehouse: Path, tmp_path: Path) -> None:
    syncs = store_of(warehouse) / "syncs"
    os.symlink(tmp_path / "outside" / "victim", syncs / "20261126T000000000000Z.manifest.gz")
    (syncs / "notes.txt").write_text("left here")
    shutil.copy(a_response(warehouse), a_response(warehouse).with_name("not-a-hash.gz"))
    problems = _verify(warehouse)
    assert "syncs/20261126T000000000000Z.manifest.gz is a symbolic link: not read" in problems
    assert "syncs/notes.txt is a file whose name the evidence store's layout does not allow" in problems
    fan = a_response(warehouse).parent.name
    assert f"responses/{fan}/not-a-hash.gz is a file whose name the evidence store's layout does not allow" \
        in problems
    assert (tmp_path / "outside" / "victim").read_text() == "precious"


def test_the_manifests_entries_are_checked_before_they_name_a_file(warehouse: Path) -> None:
    """An entry naming a response `../../../outside/victim` never reaches the file system."""
    from pipelines.evidence.manifest import Entry

    entry = Entry("GET", "/api/x", "ns", 200, "2026-11-26T00:00:00", "../../../outside/victim", 8)
    assert entry.problem() == "the entry of /api/x names a response ../../../outside/victim that is not a SHA-256"
    manifest = Manifest(Path("syncs/x.manifest"), {}, entries=[entry])
    assert manifest.entries[0].problem() is not None
