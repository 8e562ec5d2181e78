"""Confidential data is owner-only by default, whatever the umask, and group-readable
only when the setting asks for it.

Every file and folder the CLI creates (the warehouse and its WAL, the analysts'
published copy, dlt's pipeline folders, downloaded documents, exports and the HTML
report) is checked, under umask 000 (the worst case) and umask 077 (so that "group"
can only come from the setting).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from diligence.config import file_mode
from diligence.errors import SettingsError
from diligence.warehouse.filemodes import modes
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.cli.helpers import run

pytestmark = pytest.mark.slow


def _run(args: list[str], cwd: Path, umask: int, env: dict[str, str]) -> None:
    """`diligence ARGS` in this process (:func:`tests.cli.helpers.run`) under `umask`: the
    umask is the process's, and nothing else of the test process writes files meanwhile."""
    previous = os.umask(umask)
    try:
        done = run(args, cwd, {"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
                               "SOURCES__COMPANY_CONNECTIONS__PASSWORD": DEFAULT_PASSWORD, **env})
    finally:
        os.umask(previous)
    assert done.returncode == 0, done.stderr[-2000:]


def _modes_of(root: Path) -> dict[str, int]:
    """Mode of every path under `root` (except the test's own `.dlt` config folder)."""
    found = {}
    for path in root.rglob("*"):
        if ".dlt" in path.relative_to(root).parts:
            continue
        found[str(path.relative_to(root)) + ("/" if path.is_dir() else "")] = stat.S_IMODE(
            path.lstat().st_mode
        )
    return found


@pytest.mark.parametrize(
    ("setting", "umask", "expected"),
    [("default", 0o000, (0o600, 0o700)), ("group", 0o077, (0o640, 0o750))],
    ids=["owner-by-default-umask-000", "group-by-config-umask-077"],
)
def test_everything_written_gets_the_configured_modes(
    tmp_path: Path, setting: str, umask: int, expected: tuple[int, int]
) -> None:
    env: dict[str, str] = {}
    if setting == "group":  # the config file spelling (the env one is tested below)
        (tmp_path / ".dlt").mkdir()
        (tmp_path / ".dlt" / "config.toml").write_text('[warehouse]\nfile_mode = "group"\n')
    with SandboxServer(scale="small") as server:
        _run(["sync", "--base-url", server.base_url, "--warehouse", "data/w.duckdb",
              "--download-documents", "files"], tmp_path, umask, env)
    _run(["export", "--format", "csv", "--out", "reports/today", "--warehouse", "data/w.duckdb"],
         tmp_path, umask, env)
    _run(["report", "--warehouse", "data/w.duckdb", "--out", "reports/today/report.html"],
         tmp_path, umask, env)

    found = _modes_of(tmp_path)
    file_mode_, folder_mode = expected
    # everything the user would share by accident was written, and checked
    for name in ("data/w.duckdb", "data/w-analytics.duckdb", "reports/today/answers.csv",
                 "reports/today/report.html", "data/.dlt-pipelines/", "data/.dlt-pipelines/w/",
                 "files/"):
        assert name in found, sorted(found)
    assert any(name.startswith("files/") and not name.endswith("/") for name in found)
    assert any(name.startswith("data/.dlt-pipelines/w/") and not name.endswith("/") for name in found)
    wrong = {
        name: oct(mode)
        for name, mode in found.items()
        if mode != (folder_mode if name.endswith("/") else file_mode_)
    }
    assert not wrong, wrong


def test_file_mode_setting_spellings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DILIGENCE_FILE_MODE", raising=False)
    assert file_mode() == "owner"
    assert modes() == modes("owner")
    assert (modes().file, modes().folder) == (0o600, 0o700)
    monkeypatch.setenv("DILIGENCE_FILE_MODE", "group")
    assert file_mode() == "group"
    assert (modes().file, modes().folder) == (0o640, 0o750)
    monkeypatch.setenv("DILIGENCE_FILE_MODE", "world")
    with pytest.raises(SettingsError, match=r"^\[warehouse\] file_mode = 'world': input should be 'owner' or "
                       r"'group' \(set by DILIGENCE_FILE_MODE\)$"):
        modes()


def test_every_file_is_private_from_its_first_byte_while_the_sync_runs(tmp_path: Path) -> None:
    """Sampled every few milliseconds while a sync, its model build and its publish run
    under umask 000: the WAL, DuckDB's spill folder, the analysts' copy being written,
    the staged rows, the manifest and the responses kept as evidence are never readable by anyone but the owner, not
    even for a moment; and the stale temporary copy a killed publish left is removed."""
    import os
    import subprocess
    import sys
    import threading

    data = tmp_path / "data"
    data.mkdir()
    stale = data / ".w-analytics.duckdb.0123456789abcdef.tmp"  # as a publish killed mid-way leaves
    stale.write_bytes(b"confidential answers")
    with (data / (stale.name + ".wal")).open("wb") as wal:
        wal.write(b"more of them")
    seen: dict[str, int] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for path in (Path(root) / name for root, folders, files in os.walk(data)
                         for name in (*folders, *files)):
                try:
                    mode = stat.S_IMODE(path.lstat().st_mode)
                except FileNotFoundError:
                    continue
                name = str(path.relative_to(data))
                if path in (stale, data / (stale.name + ".wal")):
                    continue  # the leftovers, created by this test
                if mode & 0o077:
                    seen[name] = mode
                else:
                    seen.setdefault(name, mode)
            done.wait(0.002)

    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DILIGENCE_"))}
    env |= {"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL,
            "SOURCES__COMPANY_CONNECTIONS__PASSWORD": DEFAULT_PASSWORD}
    with SandboxServer(scale="small") as server:
        server.faults.latency_ms = 5
        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            done_sync = subprocess.run(
                ["sh", "-c", 'umask 000 && exec "$0" "$@"', str(Path(sys.executable).with_name("diligence")),
                 "sync", "--base-url", server.base_url, "-w", str(data / "w.duckdb")],
                env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        finally:
            done.set()
            sampler.join()
    assert done_sync.returncode == 0, done_sync.stderr[-3000:]
    # the files whose modes matter were seen while they existed
    for name in ("w.duckdb", "w.duckdb.wal", "w-analytics.duckdb"):
        assert name in seen, sorted(seen)
    assert any(name.endswith(".manifest") for name in seen), sorted(seen)  # being written
    assert any(name.startswith("w.evidence/responses/") and name.endswith(".gz") for name in seen), sorted(seen)
    assert any(name.startswith(".w-analytics.duckdb.") for name in seen), sorted(seen)
    readable = {name: oct(mode) for name, mode in seen.items() if mode & 0o077}
    assert not readable, readable
    assert not stale.exists() and not (data / (stale.name + ".wal")).exists()
