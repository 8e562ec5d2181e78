"""The evidence store and manifests on their own: responses kept once by hash and
owner-only, a manifest readable at any byte a kill leaves, sealing into a chain whose
hashes cover every entry, Merkle proofs, and a broken head recorded, never repaired."""

from __future__ import annotations

import gzip
import hashlib
import stat
from datetime import datetime, timezone
from pathlib import Path

import orjson
import pytest

from diligence.evidence.chain import read_store
from pipelines.company_connections.evidence import EvidenceLog, Kept, ManifestIdentity
from pipelines.evidence.manifest import Entry, read_appended, read_manifest
from pipelines.evidence.merkle import leaf_hash, merkle_proof, merkle_root, root_of_proof
from pipelines.evidence.sealing import chain_links, expected_hash, last_seal, read_head, seal
from pipelines.evidence.store import ResponseStore

NOW = datetime(2026, 11, 26, 9, 0, tzinfo=timezone.utc)


def sid(n: int) -> str:
    """The id of the n-th sync of these tests (a sync id's grammar)."""
    return f"20261126T0900{n:02d}000000Z"


def head_problem(folder: Path) -> str | None:
    return last_seal(folder, chain_links(folder))[1]
IDENTITY = ManifestIdentity.of("https://platform.example.com/", "analyst@example.com", None, "/srv/w.duckdb")


def _log(root: Path, sync_id: str, kept: Kept | None = None) -> EvidenceLog:
    return EvidenceLog.start(root, IDENTITY, sync_id=sync_id, started_at=NOW, synced_at=NOW, version="1.0",
                             kept=kept)


def _sync(root: Path, sync_id: str, bodies: dict[str, bytes]) -> str:
    log = _log(root, sync_id)
    for path, body in bodies.items():
        log.record("GET", path, "ns-1", 200, body)
    log.writer.outcome("ns-1", "committed")
    return log.writer.seal().hash


def test_a_response_is_kept_once_by_the_hash_of_its_bytes_and_owner_only(tmp_path: Path) -> None:
    store = ResponseStore(tmp_path / "store")
    body = b'{"id": "c1", "name": "Acme"}'
    sha = store.put(body)
    assert sha == hashlib.sha256(body).hexdigest()
    path = store.path(sha)
    assert path == tmp_path / "store" / "responses" / sha[:2] / f"{sha}.gz"
    assert gzip.decompress(path.read_bytes()) == body and store.get(sha) == body
    mtime = path.stat().st_mtime_ns
    assert store.put(body) == sha and path.stat().st_mtime_ns == mtime  # not written again
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert [s.sha256 for s in store] == [sha] and store.size()[0] == 1


def test_a_manifest_killed_at_any_byte_reads_up_to_its_last_whole_record(tmp_path: Path) -> None:
    log = _log(tmp_path, sid(1))
    for n in range(5):
        log.record("GET", f"/api/companies/c{n}", "ns-1", 200, f'{{"id": "c{n}"}}'.encode())
    log.writer.close()
    data = log.writer.path.read_bytes()
    whole = read_manifest(log.writer.path)
    assert whole is not None and len(whole.entries) == 5
    header_end = 8 + int.from_bytes(data[:4], "little")
    for cut in range(len(data) - 1, 0, -7):
        log.writer.path.write_bytes(data[:cut])
        torn = read_manifest(log.writer.path)
        if cut < header_end:  # not even the header: the only unreadable case
            assert torn is None
            continue
        assert torn is not None and torn.header["sync_id"] == sid(1)
        assert torn.entries == whole.entries[:len(torn.entries)]


def test_what_a_manifest_appended_is_read_from_where_the_last_read_ended(tmp_path: Path) -> None:
    """A bucket's heartbeat reads only the records added since its last push."""
    log = _log(tmp_path, sid(1))
    for n in range(3):
        log.record("GET", f"/api/companies/c{n}", "ns-1", 200, f'{{"id": "c{n}"}}'.encode())
    first = read_manifest(log.writer.path)
    assert first is not None and len(first.entries) == 3
    assert read_appended(log.writer.path, first.intact) == ([], first.intact)
    for n in range(3, 5):
        log.record("GET", f"/api/companies/c{n}", "ns-1", 200, f'{{"id": "c{n}"}}'.encode())
    log.writer.outcome("ns-1", "committed")
    log.record("GET", "/api/companies/c5", "ns-2", 200, b'{"id": "c5"}')
    with log.writer.path.open("ab") as file:  # a record torn by a kill
        file.write(b"\x40\x00\x00\x00torn")
    whole = read_manifest(log.writer.path)
    assert whole is not None and len(whole.entries) == 6 and whole.intact < whole.size
    entries, end = read_appended(log.writer.path, first.intact) or ([], 0)
    assert entries == whole.entries[3:] and end == whole.intact
    assert read_appended(tmp_path / "missing.manifest", 0) is None


def test_sealing_chains_manifests_and_the_hash_covers_every_entry(tmp_path: Path) -> None:
    first = _sync(tmp_path, sid(1), {"/api/companies/c1": b'{"id": "c1"}'})
    second = _sync(tmp_path, sid(2), {"/api/companies/c1": b'{"id": "c1"}', "/api/companies/c2": b'{"id": "c2"}'})
    assert read_head(tmp_path / "syncs") == (second, sid(2))
    store = read_store(tmp_path)
    assert [m.sync_id for m in store.ordered()] == [sid(1), sid(2)]
    assert store.problems() == []
    sealed = store.by_hash[second]
    assert sealed.seal is not None and sealed.seal["previous"] == first
    assert expected_hash(sealed) == second
    assert len(list((tmp_path / "responses").rglob("*.gz"))) == 2  # c1 is kept once
    # A different entry (one byte of a hash) gives a different manifest hash.
    altered = Entry(*[*sealed.entries[0].record()[1:6], "0" * 64, *sealed.entries[0].record()[7:]])
    sealed.entries[0] = altered
    assert expected_hash(sealed) != second


def test_unchanged_syncs_share_their_table_of_entries(tmp_path: Path) -> None:
    bodies = {f"/api/companies/c{n}": f'{{"id": "c{n}"}}'.encode() for n in range(50)}
    _sync(tmp_path, sid(1), bodies)
    one = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
    for n in range(2, 11):
        _sync(tmp_path, sid(n), bodies)
    ten = sum(p.stat().st_size for p in tmp_path.rglob("*") if p.is_file())
    assert len(list((tmp_path / "entries").rglob("*.gz"))) == 1
    assert len(list((tmp_path / "responses").rglob("*.gz"))) == 50
    # each sync adds only its sealed manifest: header, seal, and a time per entry (gzip)
    assert (ten - one) / 9 < 1200 + 50 * 12


def test_a_merkle_proof_leads_each_entry_to_the_root(tmp_path: Path) -> None:
    for size in (1, 2, 3, 5, 8, 13):
        leaves = [hashlib.sha256(str(n).encode()).hexdigest() for n in range(size)]
        root = merkle_root(leaves)
        for index, leaf in enumerate(leaves):
            assert root_of_proof(leaf, merkle_proof(leaves, index)) == root
        if size > 1:
            assert root_of_proof(leaves[0], merkle_proof(leaves, 1)) != root
    entry = Entry("GET", "/api/x", "ns", 200, NOW.isoformat(), "a" * 64, 3)
    assert leaf_hash(entry) == hashlib.sha256(orjson.dumps(entry.record())).hexdigest()


def test_a_removed_last_manifest_is_a_break_recorded_in_the_next_seal_not_repaired(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    first = _sync(tmp_path, sid(1), {"/api/a": b"1"})
    second = _sync(tmp_path, sid(2), {"/api/b": b"2"})
    assert head_problem(tmp_path / "syncs") is None
    (tmp_path / "syncs" / f"{sid(2)}.manifest.gz").unlink()  # the last manifest is removed
    gone = f"the manifest of sync {sid(2)} ({second[:12]}) is missing"
    assert head_problem(tmp_path / "syncs") == gone
    log = _log(tmp_path, sid(3))
    log.record("GET", "/api/c", "ns-1", 200, b"3")
    with caplog.at_level("WARNING", logger="diligence.evidence"):
        sealed = log.writer.seal()
    assert sealed.breaks == gone
    assert caplog.messages == [f"the evidence chain is broken: {gone}; sync {sid(3)} is sealed after it, the break "
                               "recorded (see `diligence verify`)"]
    manifest = read_manifest(tmp_path / "syncs" / f"{sid(3)}.manifest.gz")
    assert manifest is not None and manifest.seal is not None
    assert manifest.seal["previous"] == first and manifest.seal["break"] == sealed.breaks  # the last seal left
    assert expected_hash(manifest) == sealed.hash  # the break is covered by the hash
    assert read_store(tmp_path).problems() == [
        f"the manifest of sync {sid(3)} was sealed on a broken chain (its seal records the break: {gone})"]
    assert head_problem(tmp_path / "syncs") is None  # recorded once: the next sync links as usual


def test_an_interrupted_manifest_is_sealed_as_such_and_its_answers_kept(tmp_path: Path) -> None:
    log = _log(tmp_path, sid(1))
    sha = log.record("GET", "/api/companies/c1", "ns-1", 200, b'{"id": "c1"}')
    log.record("GET", "/api/companies/c2", "ns-2", 404, b"gone")
    log.writer.close()  # killed: no outcome, not sealed
    interrupted = read_manifest(log.writer.path)
    assert interrupted is not None and not interrupted.sealed
    kept = Kept.of([(interrupted, {"ns-1"})])
    entry = kept.lookup("GET", "/api/companies/c1", "ns-1")
    assert entry is not None and entry.sha256 == sha and entry.kept_from == sid(1)
    assert kept.lookup("GET", "/api/companies/c2", "ns-2") is None  # not a namespace to keep
    assert seal(log.writer.path, "interrupted").hash == read_head(tmp_path / "syncs")[0]
    sealed = read_manifest(tmp_path / "syncs" / f"{sid(1)}.manifest.gz")
    assert sealed is not None and sealed.seal is not None and sealed.seal["how"] == "interrupted"


def test_login_and_token_answers_are_never_evidence(tmp_path: Path) -> None:
    """The writer keeps what the client hands it; the client never hands it endpoints 1
    and 2 (their answers carry a token): covered end to end in test_verify, here the
    shape of what is kept for the document URL (its signature removed)."""
    from pipelines.company_connections.urls import unsigned_url_answer

    body = b'{"url": "https://files.example.com/d/1.pdf?X-Amz-Signature=abc&X-Amz-Credential=k#f", "x": 1}'
    kept = orjson.loads(unsigned_url_answer(body))
    assert kept == {"url": "https://files.example.com/d/1.pdf", "x": 1}
    assert unsigned_url_answer(b"not json") == b'{"url": null}'
