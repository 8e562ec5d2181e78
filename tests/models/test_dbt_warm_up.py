"""dbt's imports and parse run beside a sync's fetch (`warm_up`), and the build reuses them."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import diligence.analytics
import diligence.steps
from diligence.analytics import dbt, warm_up
from diligence.analytics.dbt import PROJECT_DIR
from diligence.analytics.models import build_models
from diligence.errors import DbtError

from .rawdb import AS_OF

BUILD = (str(PROJECT_DIR), "build")


def test_warm_up_parses_beside_the_caller_and_the_build_reuses_the_parse(
        clean_template: Path, tmp_path: Path) -> None:
    dbt.forget_parse()
    thread = warm_up()
    assert thread.daemon and thread.name == "dbt-warm-up"
    thread.join(timeout=120)
    assert not thread.is_alive()
    parsed = dbt._manifests[BUILD]

    warehouse = tmp_path / "warehouse.duckdb"
    shutil.copyfile(clean_template, warehouse)
    result = build_models(warehouse, as_of=AS_OF)
    assert result.row_counts["analytics.answers"] > 0
    assert dbt._manifests[BUILD] is parsed  # not parsed again


def test_a_failed_warm_up_is_left_to_the_build_which_reports_it(
        clean_template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    def broken(project_dir: Path, target: str) -> Any:
        raise DbtError("dbt could not parse sql/: models/broken.sql is not valid")

    monkeypatch.setattr(dbt, "_manifest", broken)
    thread = warm_up()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert capsys.readouterr().err == ""  # nothing printed by the thread

    warehouse = tmp_path / "warehouse.duckdb"
    shutil.copyfile(clean_template, warehouse)
    with pytest.raises(DbtError, match="broken.sql is not valid"):
        build_models(warehouse, as_of=AS_OF)


@pytest.mark.parametrize(("with_settings", "models", "warmed"),
                         [(True, True, True), (True, False, False), (False, True, False)])
def test_the_pipeline_warms_dbt_only_for_a_sync_followed_by_models(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        with_settings: bool, models: bool, warmed: bool) -> None:
    calls: list[str] = []
    monkeypatch.setattr(diligence.analytics, "warm_up", lambda: calls.append("warm_up"))
    monkeypatch.setattr(diligence.steps, "sync_step", lambda *a, **k: calls.append("sync") or
                        SimpleNamespace(namespaces=[SimpleNamespace(status="success")]))
    monkeypatch.setattr(diligence.steps, "analytics_step", lambda *a, **k: calls.append("models"))

    diligence.steps.run_pipeline(tmp_path / "w.duckdb", settings=object() if with_settings else None,  # type: ignore[arg-type]
                                 models=models)
    expected = (["warm_up"] if warmed else []) + (["sync"] if with_settings else []) + (["models"] if models else [])
    assert calls == expected


def test_two_dbt_threads_on_a_file_one_on_a_lake(tmp_path: Path) -> None:
    """A DuckLake's concurrent commits conflict, so its builds run one node at a time."""
    from diligence.warehouse.location import parse_location

    file = dbt.profile(parse_location(str(tmp_path / "w.duckdb"), None))
    lake = dbt.profile(parse_location("ducklake:postgres:dbname=lake host=db", str(tmp_path / "files")))
    assert {o["threads"] for o in file["diligence"]["outputs"].values()} == {dbt.DBT_THREADS} == {2}
    assert {o["threads"] for o in lake["diligence"]["outputs"].values()} == {1}


def test_a_build_waits_for_no_other_process_once_parsed(clean_template: Path, tmp_path: Path) -> None:
    """Only parses share the checkout (its lock); a build writes its compiled SQL into a
    folder of its own, so another process's parse or build never holds it up."""
    dbt.prepare("build")
    started = time.time()
    warehouse = tmp_path / "warehouse.duckdb"
    shutil.copyfile(clean_template, warehouse)
    lock = os.open(PROJECT_DIR / "target" / ".diligence.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # as another process's parse would
        built: list[Any] = []
        thread = threading.Thread(target=lambda: built.append(build_models(warehouse, as_of=AS_OF)),
                                  daemon=True)
        thread.start()
        thread.join(timeout=120)
        assert built and built[0].row_counts["analytics.answers"] > 0, "the build waited"
    finally:
        os.close(lock)
    written = [path for folder in ("compiled", "run")
               for path in (PROJECT_DIR / "target").glob(f"*/{folder}/**/*.sql")
               if path.stat().st_mtime >= started]
    assert written == []  # the build's files were its own, and are gone


_IMPORTS_UNDER_THE_LOCK = """
import sys, threading
from diligence.analytics import dbt
held, asked = threading.Lock(), threading.Event()

class Watched:  # the process's lock, telling when a thread asks for it
    def __enter__(self):
        asked.set()
        held.acquire()
    def __exit__(self, *exc):
        held.release()

dbt._lock = Watched()
held.acquire()  # as a warm-up importing dbt and parsing holds it
thread = threading.Thread(target=dbt.render_macro, args=("as_of",))
thread.start()
asked.wait(120)
print("dbt imported before the lock:", "dbt.cli.main" in sys.modules)
held.release()
thread.join(timeout=120)
print("finished:", not thread.is_alive())
"""


def test_an_invocation_imports_dbt_only_under_the_lock_the_warm_up_holds() -> None:
    """A sync's build can start while its warm-up thread is still importing dbt: the
    build's own imports of dbt wait for it (two threads importing dbt's modules at once
    can each get one of them half-initialised: "partially initialized module")."""
    done = subprocess.run([sys.executable, "-c", _IMPORTS_UNDER_THE_LOCK], capture_output=True,
                          text=True, timeout=300, cwd=PROJECT_DIR.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["dbt imported before the lock: False",
                                        "finished: True"], done.stdout + done.stderr[-2000:]
