"""Running the installed `diligence` console script as a user does, for the CLI tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sandbox.server import DEFAULT_EMAIL

#: the console script of the project's environment (``.venv/bin/diligence``)
DILIGENCE = str(Path(sys.executable).with_name("diligence"))
SECRET = "s3cret-Pa55word-for-tests"
EMAIL = {"SOURCES__COMPANY_CONNECTIONS__EMAIL": DEFAULT_EMAIL}
CREDENTIALS = {**EMAIL, "SOURCES__COMPANY_CONNECTIONS__PASSWORD": SECRET}


def run(
    args: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    *,
    stdin: str | None = None,
    timeout: float = 180,
) -> subprocess.CompletedProcess[str]:
    """`diligence ARGS` in `cwd`, without the caller's SOURCES__* settings, stdout/err captured."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "COLUMNS"))}
    full_env.update(env or {})
    return subprocess.run(
        [DILIGENCE, *args], cwd=cwd, env=full_env, capture_output=True, text=True,
        timeout=timeout, input=stdin if stdin is not None else "",
    )


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
