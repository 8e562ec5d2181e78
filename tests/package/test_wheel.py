"""The package installs as users install packages: the wheel `uv build` makes, into a new
virtual environment, by plain pip from the package index alone (no uv, no checkout), and
`diligence demo` runs from a folder outside the checkout: the dbt project, the report's
templates and the sandbox come from the wheel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.processes import REPO

pytestmark = pytest.mark.slow


def uv() -> list[str]:
    """uv as `make` installs it: on PATH, else the module of the Python that runs make."""
    found = shutil.which("uv")
    if found:
        return [found]
    for python in ("python3", sys.executable):
        if subprocess.run([python, "-m", "uv", "--version"], capture_output=True).returncode == 0:
            return [python, "-m", "uv"]
    pytest.fail("uv is not installed (make installs it with `python3 -m pip install uv`)")


def outside_env() -> dict[str, str]:
    """This environment without the checkout's settings and paths."""
    return {key: value for key, value in os.environ.items()
            if not key.startswith(("SOURCES__", "DILIGENCE_", "PYTHON", "VIRTUAL_ENV", "PREFECT_"))}


def test_the_wheel_installs_with_pip_and_runs_the_demo_outside_the_checkout(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    built = subprocess.run([*uv(), "build", "--wheel", "--out-dir", str(dist)], cwd=REPO,
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = dist.glob("diligence_warehouse-*.whl")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)],
        cwd=tmp_path, env=outside_env(), capture_output=True, text=True, timeout=900,
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]

    outside = tmp_path / "somewhere-else"
    outside.mkdir()
    located = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import diligence.analytics.dbt as d; print(d.PROJECT_DIR)"],
        cwd=outside, env=outside_env(), capture_output=True, text=True, timeout=120,
    )
    assert located.returncode == 0, located.stderr
    project = Path(located.stdout.strip())
    assert project.is_relative_to(venv) and (project / "dbt_project.yml").is_file()

    demo = subprocess.run([str(venv / "bin" / "diligence"), "demo"], cwd=outside, env=outside_env(),
                          capture_output=True, text=True, timeout=600)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "Synced 2 namespaces" in demo.stdout
    assert f"try: {venv / 'bin' / 'duckdb'} -readonly" in demo.stdout  # the CLI came along
    assert (outside / "reports" / "report.html").stat().st_size > 100_000
    with duckdb.connect(str(outside / "data" / "demo-analytics.duckdb"), read_only=True) as con:
        assert con.execute("select counterparty_count from analytics.headline").fetchone()[0] > 0
    cli = subprocess.run([str(venv / "bin" / "duckdb"), "--version"], capture_output=True, text=True)
    assert cli.returncode == 0 and "v1.5.5" in cli.stdout
