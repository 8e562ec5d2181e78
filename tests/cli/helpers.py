"""Running `diligence` for the CLI tests: in this process (:func:`run`, the default) or as
the installed console script a user starts (:func:`run_process`).

In this process the command skips the interpreter's start-up and the imports of dlt and
dbt (about 2 s of CPU for `status`, 8 s for `models`, each time): the same typer app,
the same arguments, its own working directory, environment and `.dlt/` folder, its
stdout, stderr and exit code kept apart. The tests where the process itself is the
point (a kill, start-up time, secrets at rest, processes racing for one warehouse)
start the console script."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from dlt.common.configuration.container import Container
from dlt.common.configuration.specs.pluggable_run_context import PluggableRunContext
from typer.testing import CliRunner

from entry import app
from sandbox.server import DEFAULT_EMAIL
from tests.helpers import kept_logging

#: the console script of the project's environment (``.venv/bin/diligence``)
DILIGENCE = str(Path(sys.executable).with_name("diligence"))
SECRET = "s3cret-Pa55word-for-tests"
EMAIL = {"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL}
CREDENTIALS = {**EMAIL, "SOURCES__COMPANY_CONNECTIONS__PASSWORD": SECRET}


#: what a test's environment must not pass on to the command
_NOT_PASSED_ON = ("SOURCES__", "COLUMNS", "DILIGENCE_")


def run_process(
    args: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    *,
    stdin: str | None = None,
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """`diligence ARGS` as a process started in `cwd`, without the caller's SOURCES__*
    settings, stdout/err captured."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(_NOT_PASSED_ON)}
    full_env.update(env or {})
    return subprocess.run(
        [DILIGENCE, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
        timeout=timeout, input=stdin if stdin is not None else "",
    )


def run(
    args: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    *,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """`diligence ARGS` run in this process as if started in `cwd` with the caller's
    environment minus its SOURCES__* settings plus `env`: dlt reads `cwd/.dlt/`, a
    relative path is relative to `cwd`. Returns what :func:`run_process` would (an
    escaped exception's traceback is on stderr, exit code 1); the test's own timeout
    applies."""
    with _as_if_started_in(cwd, env or {}):
        result = CliRunner().invoke(app, args, input=stdin if stdin is not None else "")
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(["diligence", *args], result.exit_code, result.stdout, stderr)


@contextlib.contextmanager
def _as_if_started_in(cwd: Path, env: dict[str, str]) -> Iterator[None]:
    """The working directory, environment, dlt settings folder and logging of a command
    started in `cwd` with `env`, for the duration of the block; everything is put back."""
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    # dlt's providers, reloaded either way, may give dlt's logger a handler: kept out too
    with kept_logging():
        for key in [k for k in os.environ if k.startswith(_NOT_PASSED_ON)]:
            del os.environ[key]
        os.environ.update(env, DLT_PROJECT_DIR=str(cwd))
        os.chdir(cwd)
        context = Container()[PluggableRunContext]
        context.reload_providers()  # dlt reads cwd/.dlt/, as a process started there would
        try:
            yield
        finally:
            os.chdir(saved_cwd)
            os.environ.clear()
            os.environ.update(saved_env)
            context.reload_providers()


def error_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("error:")]


@dataclass(frozen=True)
class SyncedFolder:
    """A folder where `diligence sync -w w.duckdb --json-summary run.json` ran once against
    a small sandbox like `server` (same scale, seed and password: the same world)."""

    folder: Path
    result: subprocess.CompletedProcess[str]
    base_url: str

    def copy(self, into: Path) -> Path:
        """A copy of the folder (warehouse, analysts' copy, dlt's folder, run.json) in
        `into`; returns the copied warehouse."""
        shutil.copytree(self.folder, into, dirs_exist_ok=True)
        return into / "w.duckdb"
