"""What the evidence commands write, and what they are pointed at, under attack: a kill
at each step of the seal, a forged pack, a reused ``--out``, ``--evidence`` on a file of
the warehouse, a lock file that is a link or held by a stranger, settings of the wrong
type, and a sticky shared folder whose mode no command may change."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from sandbox.server import SandboxServer
from tests.cli.helpers import CREDENTIALS, run
from tests.evidence.hostile import read_sealed, run_bounded, sealed, snapshot, sql, store_of

pytestmark = pytest.mark.timeout(180)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("step", ["written", "synced", "renamed", "head"])
def test_a_kill_at_each_step_of_the_seal_leaves_a_chain_the_next_sync_extends(
        warehouse: Path, server: SandboxServer, step: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DILIGENCE_"))}
    killed = subprocess.run(
        [sys.executable, "-m", "tests.reliability.killpoint", f"seal:{step}", "--", "sync", "--base-url",
         server.base_url, "-w", str(warehouse), "--no-models"],
        cwd=REPO, env=env | CREDENTIALS, capture_output=True, text=True, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    # the rerun and verify in this process (the killed sync is the process under test)
    rerun = run(["sync", "--base-url", server.base_url, "-w", str(warehouse), "--no-models"],
                warehouse.parent, CREDENTIALS)
    assert rerun.returncode == 0, rerun.stderr
    assert "evidence chain is broken" not in rerun.stderr
    chain = [read_sealed(path)["seal"] for path in sealed(warehouse)]
    previous = [seal["previous"] for seal in chain]
    assert len(previous) == len(set(previous)) == 4  # two syncs, the killed one, the rerun: no fork
    verified = run(["verify", "-w", str(warehouse)], warehouse.parent)
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.startswith("verified 4 syncs, ")
    assert not list((store_of(warehouse) / "syncs").glob("*.manifest")) and \
        not list((store_of(warehouse) / "syncs").glob(".*.tmp"))


def _pack(warehouse: Path, company: str, out: Path) -> subprocess.CompletedProcess[str]:
    return run(["evidence", "-w", str(warehouse), "--company", company, "--out", str(out)], warehouse.parent)


def _counterparty(warehouse: Path, offset: int = 0) -> str:
    return sql(warehouse, "select company_id from raw.documents where company_id <> namespace_company_id "
                          f"order by company_id limit 1 offset {offset}")[0][0]


def test_a_forged_or_dropped_pack_record_is_named(warehouse: Path, tmp_path: Path) -> None:
    company = _counterparty(warehouse)
    folder = tmp_path / "pack"
    assert _pack(warehouse, company, folder).returncode == 0
    pack = orjson.loads((folder / "pack.json").read_bytes())
    records = pack["records"]
    forged = {**records["documents"][0], "document_id": "forged-1", "expiration_date": "2099-12-31T00:00:00",
              "response_sha256": None, "sync_id": None}
    records["documents"].append(forged)
    records["companies"][0] = {**records["companies"][0], "name": "Forged Holdings", "response_sha256": None}
    dropped = records["documents"].pop(0)
    (folder / "pack.json").write_bytes(orjson.dumps(pack, option=orjson.OPT_INDENT_2) + b"\n")
    ran = run_bounded(["verify", str(folder)], tmp_path).bounded()
    assert ran.code == 1
    key = f"{forged['namespace_company_id']} {company} {forged['company_type_id']}"
    assert f"records.documents {key} forged-1 names no response, though it is not older than the evidence (" \
        in " ".join(ran.lines)
    assert any(line.startswith(f"records.companies {records['companies'][0]['namespace_company_id']} {company} "
                               "names no response") for line in ran.lines), ran.lines
    assert any(line.startswith(f"records.documents {dropped['namespace_company_id']} {company} "
                               f"{dropped['company_type_id']} {dropped['document_id']} ")
               and line.endswith(" is listed under the pack's seal, but missing") for line in ran.lines), ran.lines
    assert any("forged-1" in line and line.endswith(" is not listed under the pack's seal") for line in ran.lines)


def test_a_pack_out_folder_is_new_empty_or_the_same_companys_pack(warehouse: Path, tmp_path: Path) -> None:
    first, other = _counterparty(warehouse), _counterparty(warehouse, 50)
    assert first != other
    folder = tmp_path / "pack"
    assert _pack(warehouse, first, folder).returncode == 0
    (folder / "responses" / ("0" * 64 + ".json")).write_text("left from before")
    refused = _pack(warehouse, other, folder)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (f"error: --out {folder} is not empty and holds no pack of company {other}: "
                                      "name a new or empty folder (an earlier pack of the same company is replaced)")
    assert orjson.loads((folder / "pack.json").read_bytes())["company_id"] == first  # not written over
    assert _pack(warehouse, first, folder).returncode == 0  # the same company: replaced whole
    assert not (folder / "responses" / ("0" * 64 + ".json")).exists()
    assert run(["verify", str(folder)], tmp_path).returncode == 0
    for forbidden in ("/", str(Path.home())):
        said = _pack(warehouse, first, Path(forbidden))
        assert said.returncode == 2
        assert said.stderr.strip().startswith(f"error: --out {forbidden}: a pack is never written into ")


@pytest.mark.parametrize("companion", ["w.duckdb", "w.duckdb.wal", "w.duckdb.lock", "w-analytics.duckdb", "w.dbt",
                                       "w.dbt/inside"])
def test_evidence_on_a_file_of_the_warehouse_is_refused_and_the_warehouse_stays_usable(
        warehouse: Path, companion: str) -> None:
    before = snapshot(warehouse.parent.parent)
    said = run(["verify", "-w", str(warehouse), "--evidence", str(warehouse.parent / companion)], warehouse.parent)
    assert said.returncode != 0
    assert said.stderr.strip().startswith(f"error: the evidence store cannot be {warehouse.parent / companion}: ")
    assert "which belongs to the warehouse" in said.stderr
    assert snapshot(warehouse.parent.parent) == before
    assert run(["verify", "-w", str(warehouse)], warehouse.parent).returncode == 0


def test_a_lock_file_that_is_a_link_is_never_written_through(warehouse: Path, tmp_path: Path,
                                                            server: SandboxServer) -> None:
    victim = tmp_path / "outside" / "victim"
    lock = warehouse.with_name("w.duckdb.lock")
    os.symlink(victim, lock)
    ran = run_bounded(["sync", "--base-url", server.base_url, "-w", str(warehouse), "--no-models"],
                      warehouse.parent, CREDENTIALS).bounded()
    assert ran.code != 0
    assert ran.lines == [f"error: the lock file {lock} is a symbolic link: a lock is never written through it; "
                         "remove it (no diligence process is using it) and try again"]
    assert victim.read_text() == "precious"
    lock.unlink()
    dangling = tmp_path / "outside" / "created-by-a-reader"
    os.symlink(dangling, lock)
    run(["status", "-w", str(warehouse)], warehouse.parent)
    assert not dangling.exists()


def test_a_lock_held_by_a_stranger_ends_the_wait_with_one_line(warehouse: Path, server: SandboxServer,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    lock = warehouse.with_name("w.duckdb.lock")
    stranger = subprocess.Popen(["flock", "-x", str(lock), "sleep", "60"], start_new_session=True)
    try:
        monkeypatch.setattr("diligence.warehouse.lock.READERS_GRACE_SECONDS", 1.0)
        for _ in range(100):
            if lock.exists():
                break
            os.sched_yield()
        said = run(["sync", "--base-url", server.base_url, "-w", str(warehouse), "--no-models", "--wait", "1"],
                   warehouse.parent, CREDENTIALS)
    finally:
        os.killpg(stranger.pid, signal.SIGKILL)
        stranger.wait()
    assert said.returncode != 0
    assert said.stderr.strip().startswith(f"error: {warehouse} is locked by an unknown process (pid ")
    assert f": it holds {lock} but wrote no pid in it, so it is no diligence sync) for over " in said.stderr


@pytest.mark.parametrize(("where", "setting", "line"), [
    ("toml", "[evidence]\npath = 42\n", "[evidence] path = 42: input should be a valid string (set in "
     ".dlt/config.toml; env EVIDENCE__PATH or DILIGENCE_EVIDENCE)"),
    ("toml", '[warehouse]\nlocation = ["a", "b"]\n', "[warehouse] location = ['a', 'b']: input should be a valid "
     "string (set in .dlt/config.toml; env WAREHOUSE__LOCATION or DILIGENCE_WAREHOUSE)"),
    ("env", "EVIDENCE__RETAIN_DAYS=5d", "[evidence] retain_days = '5d': input should be a valid number, unable to "
     "parse string as a number (set by EVIDENCE__RETAIN_DAYS)"),
    ("env", "EVIDENCE__ENABLED=maybe", "[evidence] enabled = 'maybe': input should be a valid boolean, unable to "
     "interpret input (set by EVIDENCE__ENABLED)"),
    ("env", "SOURCES__COMPANY_CONNECTIONS__MAX_CONCURRENCY=99999999999999999999999",
     "[sources.company_connections] max_concurrency = '99999999999999999999999': input should be less than or "
     "equal to 1024 (set by SOURCES__COMPANY_CONNECTIONS__MAX_CONCURRENCY)"),
    ("env", "SOURCES__COMPANY_CONNECTIONS__REQUEST_TIMEOUT=5s", "[sources.company_connections] request_timeout = "
     "'5s': input should be a valid number, unable to parse string as a number (set by "
     "SOURCES__COMPANY_CONNECTIONS__REQUEST_TIMEOUT)"),
    ("env", "ANALYTICS__TIMEZONE=Mars/Olympus", "[analytics] timezone = 'Mars/Olympus': is not a known time zone "
     "(an IANA name such as UTC or Europe/Zurich) (set by ANALYTICS__TIMEZONE)"),
])
def test_a_setting_of_the_wrong_type_is_one_line_exit_2_and_nothing_is_created(
        tmp_path: Path, server: SandboxServer, where: str, setting: str, line: str) -> None:
    folder = tmp_path / "project"
    (folder / ".dlt").mkdir(parents=True)
    env = dict(CREDENTIALS)
    if where == "toml":
        (folder / ".dlt" / "config.toml").write_text(setting)
    else:
        name, _, value = setting.partition("=")
        env[name] = value
    ran = run_bounded(["sync", "--base-url", server.base_url, "--no-models"], folder, env).bounded()
    assert (ran.code, ran.lines) == (2, [f"error: {line}"])
    assert sorted(p.name for p in folder.iterdir()) == [".dlt"]


def test_no_command_changes_the_mode_of_a_folder_it_did_not_create(warehouse: Path, tmp_path: Path,
                                                                   server: SandboxServer) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    outside = tmp_path / "outside"
    os.chmod(outside, 0o755)
    os.symlink(outside, shared / ".dlt-pipelines")  # planted by another user of the shared folder
    target = shared / "w.duckdb"
    env = {**CREDENTIALS, "DILIGENCE_EVIDENCE": str(shared)}
    for args in (["sync", "--base-url", server.base_url, "-w", str(target), "--no-models"],
                 ["status", "-w", str(target)],
                 ["export", "--format", "csv", "--out", str(shared), "-w", str(target)],
                 ["verify", "-w", str(target)]):
        run(args, tmp_path, env)
        assert stat.S_IMODE(shared.stat().st_mode) == 0o1777, args
        assert stat.S_IMODE(outside.stat().st_mode) == 0o755, args
        assert stat.S_IMODE(Path("/tmp").stat().st_mode) == 0o1777, args


def test_pack_csvs_show_control_characters_as_the_terminal_does() -> None:
    from diligence.audit.render import _csv

    text = _csv([{"name": "Acme\x1b[31m Ltd\x07", "country": "=cmd|' /C calc'!A0"}], ("name", "country"))
    assert text == "name,country\nAcme\\x1b[31m Ltd\\x07,'=cmd|' /C calc'!A0\n"
