"""An interrupted sync resumes from its manifest: the rerun asks only for what is missing,
lands exactly what an uninterrupted sync lands (same rows, same history, no duplicates),
and seals the interrupted manifest into the evidence chain, which then verifies."""

from __future__ import annotations

import random
import shutil
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
import pytest

from diligence.audit.verify import verify_warehouse
from diligence.resume import resumable_namespaces
from diligence.warehouse import Warehouse
from pipelines.company_connections.evidence import account_digest
from pipelines.evidence.manifest import SUFFIX, read_manifest
from sandbox import edits
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.helpers import query, requests_answered, sync
from tests.processes import kill_when
from tests.reliability.test_fault_matrix import state

pytestmark = pytest.mark.slow

TODAY = datetime.now(timezone.utc).date()
CONCURRENCY = 8
#: Where the kills fall, as a share of a full sync's requests (a fixed seed).
_SEEDED = random.Random(28)
KILL_POINTS = sorted(_SEEDED.uniform(0.1, 0.95) for _ in range(4))

SYNC = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from diligence.sync import run_sync, source_settings
    run_sync(Path(sys.argv[1]), source_settings(base_url=sys.argv[2], email=sys.argv[3], password=sys.argv[4],
                                                max_concurrency=int(sys.argv[5]), token_store_path=None))
    """
)


def _stats(server: SandboxServer) -> dict[str, Any]:
    return httpx.get(f"{server.base_url}/_sandbox/stats").json()


def _reset(server: SandboxServer) -> None:
    httpx.post(f"{server.base_url}/_sandbox/stats/reset")


@pytest.fixture(scope="module")
def service() -> Iterator[SandboxServer]:
    """The small world (two namespaces, about 320 requests): with 20 ms of latency a sync
    lasts long enough for each kill to fall where it is aimed."""
    with SandboxServer(scale="small", today=TODAY) as server:
        yield server


@pytest.fixture(scope="module")
def clean(service: SandboxServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], int]:
    """What an uninterrupted sync lands, and how many requests it sends."""
    warehouse = tmp_path_factory.mktemp("clean") / "warehouse.duckdb"
    _reset(service)
    result = sync(service, warehouse, settings={"max_concurrency": CONCURRENCY})
    assert not result.failed
    return state(warehouse), _stats(service)["total"]


def _syncs(warehouse: Path) -> Path:
    """The manifests' folder of `warehouse`'s evidence store."""
    root = Warehouse(warehouse).evidence_root
    assert root is not None
    return root / "syncs"


def _unsealed(warehouse: Path) -> list[Path]:
    """The manifests being written, or left by a killed sync."""
    folder = _syncs(warehouse)
    return sorted(folder.glob(f"*{SUFFIX}")) if folder.is_dir() else []


def _kill_at(server: SandboxServer, warehouse: Path, requests: int | None) -> int:
    """Start a sync in its own process and SIGKILL it once the service has answered
    `requests` requests, or (None) once its first namespace has committed (its manifest
    records the outcome after the commit); returns how many requests were answered by then."""
    _reset(server)
    process = subprocess.Popen(
        [sys.executable, "-c", SYNC, str(warehouse), server.base_url, DEFAULT_EMAIL,
         DEFAULT_PASSWORD, str(CONCURRENCY)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def first_commit() -> bool:
        return any((m := read_manifest(path)) is not None and m.outcomes for path in _unsealed(warehouse))

    kill_when(process, first_commit if requests is None
              else lambda: requests_answered(server) >= requests)
    assert process.returncode == -signal.SIGKILL
    return requests_answered(server)


def _kill_slowed(server: SandboxServer, warehouse: Path, requests: int) -> None:
    """`_kill_at` with every answer 2 ms late, so that the kill falls near `requests`."""
    server.faults.latency_ms = 2
    try:
        _kill_at(server, warehouse, requests)
    finally:
        server.faults.latency_ms = 0


def _sync_afresh(server: SandboxServer, warehouse: Path, caplog: pytest.LogCaptureFixture) -> Any:
    """A complete sync into `warehouse` from a reset service, its evidence's warnings in
    `caplog`."""
    _reset(server)
    with caplog.at_level("WARNING", logger="diligence.evidence"):
        result = sync(server, warehouse, settings={"max_concurrency": CONCURRENCY})
    assert not result.failed
    return result


def test_sigkill_at_several_points_then_the_rerun_is_exact_and_asks_only_what_is_missing(
        service: SandboxServer, clean: tuple[dict[str, Any], int], tmp_path: Path) -> None:
    expected, full = clean
    namespaces = len(service.world.namespaces)
    service.faults.latency_ms = 20  # so that a kill falls where it is aimed
    skipped = 0
    try:
        # the seeded shares of the requests, then right after the first commit
        for number, share in enumerate([*KILL_POINTS, None]):
            warehouse = tmp_path / f"killed-{number}" / "warehouse.duckdb"
            warehouse.parent.mkdir()
            answered = _kill_at(service, warehouse, None if share is None else int(share * full))
            _reset(service)
            result = sync(service, warehouse, settings={"max_concurrency": CONCURRENCY})
            rerun = _stats(service)["total"]
            assert not result.failed, [o.error for o in result.failed]
            assert state(warehouse) == expected, f"kill at {share or 'the first commit'}"
            # Only what the killed sync had not got: at most the requests in flight at
            # the kill, plus login, user-info and each namespace's connection list again.
            assert rerun <= full - answered + CONCURRENCY + 2 + namespaces, (share, answered, rerun, full)
            kept = sum(o.requests_kept for o in result.namespaces)
            assert kept + len(result.not_read_again) > 0
            skipped += len(result.not_read_again)
            assert not _unsealed(warehouse), "an unsealed manifest was left"
            verified = verify_warehouse(Warehouse(warehouse))
            assert verified.ok, verified.problems
            assert verified.syncs == 2 and verified.rows > 0  # the killed sync's, sealed, then the rerun's
    finally:
        service.faults.latency_ms = 0
    # The kill after the first commit (at least): the rerun did not read that namespace again.
    assert skipped > 0


def test_a_torn_manifest_tail_is_dropped_and_the_rest_is_kept(
        service: SandboxServer, clean: tuple[dict[str, Any], int], tmp_path: Path) -> None:
    expected, full = clean
    warehouse = tmp_path / "warehouse.duckdb"
    _kill_slowed(service, warehouse, full // 3)
    [torn] = _unsealed(warehouse)
    before = {j.namespace: j.requests_kept for j in resumable_namespaces(Warehouse(warehouse))}
    assert before
    with torn.open("ab") as file:  # half a record: a length, a checksum, a few bytes
        file.write((1000).to_bytes(4, "little") + b"\x00\x01\x02\x03" + b'["E", "GE')
    after = {j.namespace: j.requests_kept for j in resumable_namespaces(Warehouse(warehouse))}
    assert after == before
    result = sync(service, warehouse, settings={"max_concurrency": CONCURRENCY})
    assert not result.failed
    assert state(warehouse) == expected
    assert verify_warehouse(Warehouse(warehouse)).ok


def test_a_manifest_of_another_account_is_not_resumed(
        service: SandboxServer, clean: tuple[dict[str, Any], int], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    expected, full = clean
    warehouse = tmp_path / "warehouse.duckdb"
    _kill_slowed(service, warehouse, full // 2)
    assert resumable_namespaces(Warehouse(warehouse))
    # Same service and namespaces, but the manifest says another login wrote it.
    for path in _unsealed(warehouse):
        _rewrite_account(path, account_digest(service.base_url, "someone-else@example.com"))
    result = _sync_afresh(service, warehouse, caplog)
    assert sum(o.requests_kept for o in result.namespaces) == 0
    assert not result.not_read_again
    assert "written for another account" in caplog.text
    assert state(warehouse) == expected


def test_a_manifest_copied_into_another_warehouses_store_is_not_resumed_with_a_line(
        service: SandboxServer, clean: tuple[dict[str, Any], int], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    expected, full = clean
    killed, other = tmp_path / "killed" / "warehouse.duckdb", tmp_path / "other" / "warehouse.duckdb"
    killed.parent.mkdir()
    _kill_slowed(service, killed, full // 2)
    other.parent.mkdir()
    shutil.copytree(_syncs(killed).parent, _syncs(other).parent)  # the same account, URL and selection
    assert resumable_namespaces(Warehouse(other))
    result = _sync_afresh(service, other, caplog)
    assert sum(o.requests_kept for o in result.namespaces) == 0  # "resuming" nothing of the other's
    assert f"it was written for another warehouse ({killed.resolve()})" in caplog.text
    assert state(other) == expected


def test_a_manifest_whose_header_is_damaged_is_named_in_one_line_and_kept_aside(
        service: SandboxServer, clean: tuple[dict[str, Any], int], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    expected, full = clean
    warehouse = tmp_path / "warehouse.duckdb"
    _kill_slowed(service, warehouse, full // 2)
    [damaged] = _unsealed(warehouse)
    data = bytearray(damaged.read_bytes())
    data[12] ^= 0xFF  # a byte of the header's payload: its checksum no longer matches
    damaged.write_bytes(bytes(data))
    _sync_afresh(service, warehouse, caplog)
    lines = [r.getMessage() for r in caplog.records if "cannot be read" in r.getMessage()]
    assert lines == [f"the manifest {damaged} cannot be read (its header is damaged): it is kept aside "
                     f"as {damaged.name}.damaged, and its namespaces are read afresh"]
    assert state(warehouse) == expected
    assert (damaged.parent / f"{damaged.name}.damaged").exists() and not _unsealed(warehouse)


def _rewrite_account(path: Path, account: str) -> None:
    """Rewrite a manifest's header as if another account had written it (checksums right)."""
    import struct
    import zlib

    import orjson

    data = path.read_bytes()
    length, _ = struct.unpack_from("<II", data, 0)
    header = orjson.loads(data[8:8 + length])
    header["account"] = account
    payload = orjson.dumps(header)
    path.write_bytes(struct.pack("<II", len(payload), zlib.crc32(payload)) + payload + data[8 + length:])


def test_a_connection_removed_after_the_crash_is_retired_not_loaded(tmp_path: Path) -> None:
    with SandboxServer(scale="small", today=TODAY) as server:
        warehouse = tmp_path / "warehouse.duckdb"
        sync(server, warehouse)  # a first full sync: the connection is current
        ns = server.world.namespaces[-1]
        removed = next(c for c, _ in server.world.readable_pairs(ns) if c != ns)
        _reset(server)
        sync(server, tmp_path / "probe.duckdb")
        full = _stats(server)["total"]
        server.faults.latency_ms = 5
        try:
            _kill_at(server, warehouse, int(full * 0.6))
        finally:
            server.faults.latency_ms = 0
        resumable = resumable_namespaces(Warehouse(warehouse))
        assert ns in {j.namespace for j in resumable}, "the kill came after the namespace committed"
        edits.remove_connection(server.world, ns, removed)
        result = sync(server, warehouse)
        assert not result.failed
        reference = tmp_path / "reference.duckdb"
        sync(server, reference)
    current = ("select count(*) from raw.connections where namespace_company_id = ? "
               "and company_id = ? and _dlt_valid_to is null")
    assert query(warehouse, current, ns, removed) == [(0,)]
    assert query(warehouse, current.replace("is null", "is not null"), ns, removed) == [(1,)]
    questionnaires = ("select count(*) from raw.questionnaires where namespace_company_id = ? "
                      "and company_id = ? and _dlt_valid_to is null")
    assert query(warehouse, questionnaires, ns, removed) == [(0,)]
    live = {name: [row for row in rows] for name, rows in state(reference).items()}
    assert _current(warehouse) == _current(reference), live.keys()


def _current(warehouse: Path) -> list[tuple[Any, ...]]:
    return sorted(query(warehouse, "select namespace_company_id, company_id, company_type_id, content_hash "
                                   "from raw.questionnaires where _dlt_valid_to is null"))
