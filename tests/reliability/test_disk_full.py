"""A full disk at any phase of a sync: one line naming the path and the space free (and
about how much is needed), exit 1, and the previous warehouse and analysts' copy intact;
once space is freed, the next sync completes.

The warehouse lives on a small tmpfs the test mounts (root, or sudo without a password,
as `make test` installs its packages). The disk is filled completely at the start of
the phase (:mod:`tests.reliability.diskfull`): the fetch's staged rows and the evidence,
the first namespace's load, the dbt build, the publish of the analysts' copy.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sandbox import edits
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.cli.helpers import run
from tests.helpers import queries
from tests.processes import REPO
from tests.reliability import diskfull

pytestmark = pytest.mark.slow

CREDENTIALS = {"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
               "SOURCES__COMPANY_CONNECTIONS__PASSWORD": DEFAULT_PASSWORD}
STATE = {
    "raw": "select namespace_company_id, status, rows_loaded from raw.sync_runs order by all",
    "questionnaires": "select content_hash, _dlt_valid_to is null from raw.questionnaires order by all",
    "analytics": "select namespace_company_id, company_id, field_id, answer_text from analytics.answers "
                 "order by all",
}


def _as_root(*command: str) -> list[str]:
    return list(command) if os.geteuid() == 0 else ["sudo", "-n", *command]


@pytest.fixture(scope="module")
def tmpfs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A 48 MB tmpfs, mounted for the module."""
    mount = tmp_path_factory.mktemp("tmpfs")
    done = subprocess.run(_as_root("mount", "-t", "tmpfs", "-o", "size=48m,mode=0755", "tmpfs", str(mount)),
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (root or sudo needed): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(_as_root("umount", "-l", str(mount)), check=False)


@pytest.fixture(scope="module")
def synced(tmpfs: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a warehouse synced (models and analysts' copy too), kept off the
    tmpfs: each test starts from a copy of it on the tmpfs."""
    kept = tmp_path_factory.mktemp("synced") / "data"
    with SandboxServer(scale="small") as server:
        done = run(["sync", "--base-url", server.base_url, "-w", str(kept / "w.duckdb")], kept.parent, CREDENTIALS)
    assert done.returncode == 0, done.stderr[-3000:]
    return kept


def _filling_the_disk(phase: str, filler: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    """`diligence ARGS` as a process whose disk fills at the start of `phase`
    (:mod:`tests.reliability.diskfull`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DILIGENCE_"))}
    return subprocess.run([sys.executable, "-m", "tests.reliability.diskfull", phase, str(filler), "--", *args],
                          cwd=REPO, env=env | CREDENTIALS | {"COLUMNS": "1000", "PYTHONPATH": f"{diskfull.SITE}:{REPO}"},
                          capture_output=True, text=True, timeout=300)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _revise(server: SandboxServer) -> None:
    """An answer revised upstream, so the next sync has something to load."""
    world = server.world
    ns = world.namespaces[0]
    company, type_id = next((c, t) for c, t in world.readable_pairs(ns) if c != ns)
    field = next(f for form in world.questionnaire(company, type_id)["questionnaires"]["forms"]
                 for f in form["fields"] if f["type"] == "Input")
    edits.set_answer(world, company, type_id, field["id"], {"value": "revised while the disk was full"})


@pytest.mark.parametrize("phase", ["fetch", "load", "build", "publish"])
def test_a_full_disk_is_one_line_and_loses_nothing(synced: Path, tmpfs: Path, phase: str) -> None:
    data = tmpfs / "data"
    shutil.rmtree(data, ignore_errors=True)
    shutil.copytree(synced, data)
    warehouse, published = data / "w.duckdb", data / "w-analytics.duckdb"
    before, copy_before = queries(warehouse, STATE), _digest(published)
    filler = tmpfs / "filler"
    try:
        with SandboxServer(scale="small") as server:
            _revise(server)
            # a disk full in the fetch or the load ends the sync before its models: without
            # them its process does not parse dbt meanwhile (about 5 CPU s) for nothing
            early = ["--no-models"] if phase in ("fetch", "load") else []
            failed = _filling_the_disk(phase, filler, ["sync", "--base-url", server.base_url, "-w", str(warehouse),
                                                       *early])
            assert failed.returncode == 1, (failed.stdout[-2000:], failed.stderr[-3000:])
            lines = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
            assert len(lines) == 1, failed.stderr[-3000:]
            assert lines[0].startswith(f"error: disk full: no space left for {tmpfs}"), lines[0]
            assert " free on its device" in lines[0] and "Traceback" not in failed.stderr
            filler.unlink()
            # the warehouse as it was before the failed step: the build comes after the
            # load committed (raw has the new sync), the publish after the build was
            # swapped into analytics; and the analysts' copy as it was, always
            after = queries(warehouse, STATE)
            committed = {"fetch": set(), "load": set(), "build": {"raw", "questionnaires"},
                         "publish": {"raw", "questionnaires", "analytics"}}[phase]
            assert {key for key in STATE if after[key] != before[key]} == committed
            assert _digest(published) == copy_before
            assert not list(data.glob(".w-analytics.duckdb.*"))  # no temporary copy left
            # space freed: the next sync completes, the revision reaches the analysts' copy
            # (in this process: only the failing sync's process is the point)
            again = run(["sync", "--base-url", server.base_url, "-w", str(warehouse)], data, CREDENTIALS)
            assert again.returncode == 0, again.stderr[-3000:]
        revised = queries(published, {"": "select count(*) from analytics.answers "
                                             "where answer_text = 'revised while the disk was full'"})
        assert revised[""] == [(len(_namespaces_reading(warehouse)),)]
    finally:
        filler.unlink(missing_ok=True)


def _namespaces_reading(warehouse: Path) -> list[Any]:
    """The namespaces whose answers hold the revised one (every namespace that reads it)."""
    return queries(warehouse, {"": "select distinct namespace_company_id from analytics.answers "
                                    "where answer_text = 'revised while the disk was full'"})[""]
