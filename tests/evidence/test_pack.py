"""The auditor's pack: one counterparty as it stood at a date, with the responses that
carried it and the chain that seals them; it verifies on its own (moved away from the
warehouse and its store), names any file altered, and refuses what it cannot prove."""

from __future__ import annotations

import csv
import hashlib
import re
import shutil
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import orjson
import pytest

from sandbox.server import SandboxServer
from tests.cli.helpers import SECRET, run
from tests.evidence.test_verify import change_an_answer
from tests.helpers import settings_for


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, datetime, datetime]]:
    """Two syncs, a counterparty's answer changed between them: (warehouse, the
    counterparty, the first sync's time, the second's)."""
    from diligence.sync import run_sync

    warehouse = tmp_path_factory.mktemp("pack") / "w.duckdb"
    with SandboxServer(scale="small", password=SECRET) as server:
        settings = settings_for(server, password=SECRET)
        first = run_sync(warehouse, settings)
        ns = server.world.namespaces[0]
        company, company_type = next((c, t) for c, t in server.world.readable_pairs(ns) if c != ns)
        change_an_answer(server, company, company_type)
        second = run_sync(warehouse, settings)
    yield warehouse, company, first.synced_at, second.synced_at


def _pack(warehouse: Path, company: str, out: Path, *extra: str) -> tuple[int, str, str]:
    result = run(["evidence", "-w", str(warehouse), "--company", company, "--out", str(out), *extra], warehouse.parent)
    return result.returncode, result.stdout, result.stderr


def _verify(folder: Path, *extra: str) -> tuple[int, list[str], str]:
    result = run(["verify", str(folder), *extra], folder.parent)
    return result.returncode, result.stderr.splitlines(), result.stdout


def test_a_pack_verifies_on_its_own_far_from_the_warehouse(history: tuple[Path, str, datetime, datetime],
                                                           tmp_path: Path) -> None:
    warehouse, company, _first, _second = history
    code, output, errors = _pack(warehouse, company, tmp_path / "pack")
    assert code == 0, errors
    assert output.startswith(f"evidence pack of {company} as of ")
    moved = shutil.move(tmp_path / "pack", tmp_path / "elsewhere" / "pack")  # no warehouse, no store near
    code, problems, output = _verify(Path(moved))
    assert (code, problems) == (0, [])
    # every kept manifest of the chain, from its first to the head (entries only where used)
    assert re.match(r"^verified 2 syncs, \d+ responses, \d+ rows; head [0-9a-f]{64}$", output.strip()), output
    folder = Path(moved)
    assert {p.name for p in folder.iterdir()} == {"index.html", "README.md", "pack.json", "records", "responses"}
    page = (folder / "index.html").read_text()
    assert "changed between syncs" in page and "<script" not in page
    answers = list(csv.DictReader((folder / "records" / "answers.csv").open()))
    assert "changed between syncs" in {a["answer"] for a in answers}
    pack = orjson.loads((folder / "pack.json").read_bytes())
    assert {r["company_id"] for rows in pack["records"].values() for r in rows} == {company}


def test_as_of_between_the_syncs_shows_the_first_answer_and_the_chain_to_the_head(
        history: tuple[Path, str, datetime, datetime], tmp_path: Path) -> None:
    warehouse, company, first, second = history
    between = first + (second - first) / 2
    code, _output, errors = _pack(warehouse, company, tmp_path / "pack", "--as-of", between.isoformat())
    assert code == 0, errors
    pack = orjson.loads((tmp_path / "pack" / "pack.json").read_bytes())
    assert len(pack["syncs"]) == 2  # the first sync, then the chain on to the head
    assert pack["syncs"][0]["entries"] and not pack["syncs"][1]["entries"]
    assert "changed between syncs" not in (tmp_path / "pack" / "index.html").read_text()
    assert _verify(tmp_path / "pack")[0] == 0


def test_a_pack_file_altered_is_named(history: tuple[Path, str, datetime, datetime], tmp_path: Path) -> None:
    warehouse, company, _first, _second = history
    assert _pack(warehouse, company, tmp_path / "pack")[0] == 0
    folder = tmp_path / "pack"
    response = sorted((folder / "responses").iterdir())[0]
    body = response.read_bytes()
    altered = body.replace(b'"', b"'", 1)
    response.write_bytes(altered)
    code, problems, _ = _verify(folder)
    assert code == 1
    assert problems[0] == (f"responses/{response.name} was altered: its bytes hash to "
                           f"{hashlib.sha256(altered).hexdigest()}")
    response.write_bytes(body)
    page = folder / "index.html"
    page.write_text(page.read_text().replace("Evidence pack", "Evidence pack (certified)", 1))
    assert _verify(folder)[:2] == (1, ["index.html was altered: it is not what pack.json holds"])
    page.unlink()
    assert _pack(warehouse, company, tmp_path / "again")[0] == 0
    shutil.copy(tmp_path / "again" / "index.html", page)  # a fresh page, different created_at
    assert _verify(folder)[:2] == (1, ["index.html was altered: it is not what pack.json holds"])


def test_a_record_edited_in_pack_json_is_named(history: tuple[Path, str, datetime, datetime],
                                              tmp_path: Path) -> None:
    warehouse, company, _first, _second = history
    assert _pack(warehouse, company, tmp_path / "pack")[0] == 0
    path = tmp_path / "pack" / "pack.json"
    pack = orjson.loads(path.read_bytes())
    record = pack["records"]["companies"][0]
    record["name"] = "Someone Else Ltd"
    path.write_bytes(orjson.dumps(pack, option=orjson.OPT_INDENT_2) + b"\n")
    code, problems, _ = _verify(tmp_path / "pack")
    assert code == 1
    assert problems[0] == (f"records.companies namespace {record['namespace_company_id']} company {company} "
                           f"(version from {record['_dlt_valid_from']}) was edited: name differs from its "
                           f"response {record['response_sha256'][:12]}")
    # the readable files no longer match it either
    assert "index.html was altered: it is not what pack.json holds" in problems


def test_a_seal_edited_in_pack_json_is_named(history: tuple[Path, str, datetime, datetime], tmp_path: Path) -> None:
    warehouse, company, _first, _second = history
    assert _pack(warehouse, company, tmp_path / "pack")[0] == 0
    path = tmp_path / "pack" / "pack.json"
    pack = orjson.loads(path.read_bytes())
    sync = pack["syncs"][0]
    sync["header"]["synced_at"] = "2020-01-01T00:00:00+00:00"
    path.write_bytes(orjson.dumps(pack, option=orjson.OPT_INDENT_2) + b"\n")
    code, problems, _ = _verify(tmp_path / "pack")
    assert code == 1
    assert problems[0] == f"sync {sync['sync_id']} in pack.json was edited: its manifest does not hash to its seal"


def test_what_a_pack_cannot_show_is_a_clear_error(history: tuple[Path, str, datetime, datetime],
                                                  tmp_path: Path) -> None:
    warehouse, company, first, _second = history
    before = (first - timedelta(days=1)).astimezone(timezone.utc)
    code, _output, errors = _pack(warehouse, company, tmp_path / "p1", "--as-of", before.isoformat())
    assert code == 2
    assert f"--as-of {before.isoformat()} is before the first sync kept as evidence ({first.isoformat()}" in errors
    code, _output, errors = _pack(warehouse, "no-such-company", tmp_path / "p2")
    assert code == 2
    assert "company no-such-company has no record as of " in errors
    assert not (tmp_path / "p1").exists() and not (tmp_path / "p2").exists()
    code, problems, _ = _verify(tmp_path)  # a folder that is not a pack
    assert code == 2
    assert f"{tmp_path} is not an evidence pack: it has no pack.json" in " ".join(problems)


def test_hostile_text_stays_text_in_the_pack(tmp_path: Path) -> None:
    """Counterparty text that is HTML or a formula is escaped in the page and guarded in
    the CSV, and the pack still verifies."""
    from diligence.sync import run_sync

    warehouse = tmp_path / "w.duckdb"
    with SandboxServer(scale="small", password=SECRET, hostile=True) as server:
        result = run_sync(warehouse, settings_for(server, password=SECRET))
    # (the hostile world also nests one answer too deep: that namespace fails on purpose)
    assert any(o.status == "success" for o in result.namespaces)
    con = duckdb.connect(str(warehouse), read_only=True)
    company = con.execute("select company_id from raw.companies where name like '%<%' or name like '=%' "
                          "order by company_id limit 1").fetchone()
    con.close()
    assert company is not None
    assert _pack(warehouse, company[0], tmp_path / "pack")[0] == 0
    page = (tmp_path / "pack" / "index.html").read_text()
    assert "<script" not in page.lower() and "<img" not in page.lower()
    for row in csv.reader((tmp_path / "pack" / "records" / "companies.csv").open()):
        assert not any(cell.startswith(("=", "+", "-", "@")) for cell in row)
    assert _verify(tmp_path / "pack")[0] == 0
