"""Start and stop the real processes of the lake's Prefect test: a local Prefect server
and process workers, each in its own process group, stopped by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
PREFECT = Path(sys.executable).with_name("prefect")


def base_env(home: Path) -> dict[str, str]:
    """This process's environment without Prefect, dlt-source and diligence settings."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PREFECT_", "SOURCES__", "SCHEDULE__", "DILIGENCE_"))
    }
    env.update(
        PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", PYTHONUNBUFFERED="1"
    )
    return env


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            args, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop(process: subprocess.Popen[bytes]) -> None:
    """End the process and everything it started (its own process group), by its PID."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # leftovers of the group, e.g. a flow run
    except ProcessLookupError:
        pass
    process.wait(timeout=15)


def wait_for(
    what: str, check: Callable[[], Any], process: subprocess.Popen[bytes], log: Path,
    timeout: float,
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{what}: exited ({process.returncode}):\n{log.read_text()[-3000:]}")
        try:
            result = check()
        except (httpx.HTTPError, OSError):
            result = None
        if result:
            return result
        time.sleep(0.5)
    pytest.fail(f"{what}: timed out after {timeout} s:\n{log.read_text()[-3000:]}")
