"""dbt's imports and parse run beside a sync's fetch, in the process the build then runs in
(`warm_up`, :mod:`diligence.analytics.aside`)."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pytest

import diligence.analytics
import diligence.steps
from diligence.analytics import aside, build_and_publish, dbt, rebuild_analytics
from diligence.analytics.dbt import PROJECT_DIR
from diligence.analytics.models import build_models
from diligence.errors import DbtError, ModelError, ModelProcessError, RemoteTraceback
from diligence.warehouse.location import parse_location

from . import aside_work
from .rawdb import AS_OF

_BUILD_ASIDE = """
import sys
from datetime import datetime
from diligence.analytics import rebuild_analytics, warm_up

builder = warm_up()
print("aside:", builder is not None)
result = rebuild_analytics(sys.argv[1], as_of=datetime.fromisoformat(sys.argv[2]))
print("dbt here:", "dbt.cli.main" in sys.modules)
print("answers:", result.models.row_counts["analytics.answers"])
print("copy:", result.published)
print("builder exited:", builder._process.wait(60) == 0)
"""


def test_a_sync_process_builds_its_models_in_a_process_of_its_own(
        clean_template: Path, tmp_path: Path) -> None:
    """A process without dbt (a sync's) starts the builder before its fetch and never
    imports dbt itself; the models and the analysts' copy are those of a build in place."""
    aside, here = tmp_path / "aside.duckdb", tmp_path / "here.duckdb"
    shutil.copyfile(clean_template, aside)
    shutil.copyfile(clean_template, here)
    script = tmp_path / "script.py"  # a user's script, without `if __name__ == "__main__"`:
    script.write_text(_BUILD_ASIDE)  # the builder does not run it again
    done = subprocess.run([sys.executable, str(script), str(aside), AS_OF.isoformat()],
                          capture_output=True, text=True, timeout=300, cwd=PROJECT_DIR.parent,
                          env=os.environ | {"PYTHONPATH": str(PROJECT_DIR.parent)})
    assert done.returncode == 0, done.stderr[-3000:]
    built = rebuild_analytics(here, as_of=AS_OF)
    assert done.stdout.splitlines() == [
        "aside: True", "dbt here: False", f"answers: {built.models.row_counts['analytics.answers']}",
        f"copy: {tmp_path / 'aside-analytics.duckdb'}", "builder exited: True"], done.stdout
    assert "leaked" not in done.stderr and "Traceback" not in done.stderr, done.stderr[-2000:]
    for path in (aside, here):
        with duckdb.connect(str(path.with_name(path.stem + "-analytics.duckdb")), read_only=True) as con:
            assert con.execute("select count(*) from analytics.answers").fetchone()[0] > 0


def test_the_builder_forwards_its_logs_and_raises_its_error_here(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    builder = aside.ModelBuilder(aside_work.fail)
    with caplog.at_level(logging.WARNING, logger="diligence"), \
            pytest.raises(ModelError, match="model answers failed: Binder Error") as raised:
        builder.build(parse_location(str(tmp_path / "w.duckdb"), None))
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("diligence.analytics", f"building in process {builder.pid}")]
    assert raised.value.path == Path("/warehouse/folder")  # what the full-disk line names
    assert raised.value.sql_path == Path("run/answers.sql")
    assert isinstance(raised.value.__cause__, RemoteTraceback)
    assert "aside_work.py" in str(raised.value.__cause__)
    assert builder._process.wait(60) == 1  # it answered, then exited by itself


def test_a_builder_that_dies_is_one_error_and_one_that_is_not_needed_is_ended(tmp_path: Path) -> None:
    builder = aside.ModelBuilder(aside_work.die)
    with pytest.raises(ModelProcessError, match="ended before it answered [(]killed by SIGKILL[)]"):
        builder.build(parse_location(str(tmp_path / "w.duckdb"), None))

    idle = aside.ModelBuilder(aside_work.die)
    started = time.monotonic()
    idle.close()  # the step it was for did not come: a sync that failed, or loaded nothing
    assert not idle.alive() and time.monotonic() - started < 10


_KILLED_WHILE_BUILDING = """
import os, signal, threading, time
from diligence.analytics import aside
from diligence.warehouse.location import parse_location
from tests.models import aside_work
builder = aside.ModelBuilder(aside_work.wait)
threading.Thread(target=builder.build, args=(parse_location("w.duckdb", None),), daemon=True).start()
time.sleep(5)  # the request sent: the process is at work, not waiting to read
print(builder.pid, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_the_builder_ends_with_the_process_that_started_it() -> None:
    """A sync killed (SIGKILL, the OOM killer) leaves no builder behind: it would write
    the warehouse with no writer lock held."""
    done = subprocess.run([sys.executable, "-c", _KILLED_WHILE_BUILDING], capture_output=True,
                          text=True, timeout=120, cwd=PROJECT_DIR.parent)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    pid = int(done.stdout.split()[0])
    deadline = time.monotonic() + 60
    while Path(f"/proc/{pid}").exists() and "Z" not in _state(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not Path(f"/proc/{pid}").exists() or "Z" in _state(pid), "the builder outlived the sync"


_LINGERING = """
from diligence.analytics import aside
from diligence.warehouse.location import parse_location
from tests.models import aside_work
builder = aside.ModelBuilder(aside_work.linger)
print(builder.build(parse_location("w.duckdb", None)), builder.pid, flush=True)
"""


def test_the_output_of_a_sync_ends_with_the_sync_not_with_its_builder() -> None:
    """A reader of the sync's output (a pipe, `| tee`, Prefect's worker) is done when the
    sync exits: the builder, still exiting, and the resource tracker it started hold
    none of that output."""
    try:
        done = subprocess.run([sys.executable, "-c", _LINGERING], capture_output=True, text=True,
                              timeout=120, cwd=PROJECT_DIR.parent)  # the builder lingers 600 s
    except subprocess.TimeoutExpired as exc:
        raise AssertionError("the sync's output stayed open after it exited") from exc
    assert done.returncode == 0, done.stderr[-2000:]
    answer, pid = done.stdout.rsplit(maxsplit=1)
    assert answer == "built, holding Lock"
    try:
        assert _state(int(pid)) not in ("gone", "Z")  # still exiting: what the pipe did not wait for
    finally:
        os.kill(int(pid), signal.SIGKILL)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return "gone"


def test_a_failed_parse_is_left_to_the_build_which_reports_it(clean_template: Path, tmp_path: Path) -> None:
    project = tmp_path / "sql"
    shutil.copytree(PROJECT_DIR, project, ignore=shutil.ignore_patterns("target", "logs", "dbt_packages"))
    (project / "models" / "marts" / "broken.yml").write_text("version: 2\nmodels: [{name: }\n")
    warehouse = tmp_path / "warehouse.duckdb"
    shutil.copyfile(clean_template, warehouse)
    builder = aside.ModelBuilder(build_and_publish, project_dir=project)
    with pytest.raises(DbtError, match="dbt could not parse sql/: Parsing Error"):
        builder.build(parse_location(str(warehouse), None), as_of=AS_OF, project_dir=project)


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


def test_a_builder_that_cannot_start_leaves_the_build_to_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(*args: Any, **kwargs: Any) -> None:
        raise BlockingIOError("Resource temporarily unavailable")  # fork refused: out of processes

    monkeypatch.delitem(sys.modules, "dbt.cli.main", raising=False)  # as a sync's process, without dbt
    monkeypatch.setattr(aside, "ModelBuilder", refused)
    assert aside.start(build_and_publish) is None
    assert aside.take() is None  # so rebuild_analytics builds in place
