"""The package installs as users install packages: the wheel `uv build` makes, into a new
virtual environment, by plain pip from the package index alone (no uv, no checkout), and
`diligence demo` runs from a folder outside the checkout: the dbt project, the report's
templates, the sandbox and DuckDB's shell come from the wheel. One installation (a
module fixture) serves the three tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.processes import REPO

# the first test sets up the module's venv: pip may take up to its own 900 s on a busy registry
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


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


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtual environment with the wheel `uv build` makes installed by plain pip."""
    root = tmp_path_factory.mktemp("wheel")
    dist = root / "dist"
    built = subprocess.run([*uv(), "build", "--wheel", "--out-dir", str(dist)], cwd=REPO,
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = dist.glob("diligence_warehouse-*.whl")

    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run(
        # --no-compile: pip's bytecode for every installed module is not what is tested
        # here (Python compiles what the demo imports); it was most of the test's CPU
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-compile", str(wheel)],
        cwd=root, env=outside_env(), capture_output=True, text=True, timeout=900,
    )
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return venv


def test_the_dbt_project_comes_from_the_wheel(venv: Path, tmp_path: Path) -> None:
    located = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import diligence.analytics.dbt as d; print(d.PROJECT_DIR)"],
        cwd=tmp_path, env=outside_env(), capture_output=True, text=True, timeout=120,
    )
    assert located.returncode == 0, located.stderr
    project = Path(located.stdout.strip())
    assert project.is_relative_to(venv) and (project / "dbt_project.yml").is_file()


def test_the_demo_runs_outside_the_checkout(venv: Path, tmp_path: Path) -> None:
    demo = subprocess.run([str(venv / "bin" / "diligence"), "demo"], cwd=tmp_path, env=outside_env(),
                          capture_output=True, text=True, timeout=600)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert "Synced 2 namespaces" in demo.stdout
    assert f"try: {venv / 'bin' / 'duckdb'} -readonly" in demo.stdout  # the CLI came along
    assert (tmp_path / "reports" / "latest" / "report.html").stat().st_size > 100_000  # the run's folder
    with duckdb.connect(str(tmp_path / "data" / "demo-analytics.duckdb"), read_only=True) as con:
        assert con.execute("select counterparty_count from analytics.headline").fetchone()[0] > 0


def test_duckdbs_shell_comes_with_it(venv: Path) -> None:
    cli = subprocess.run([str(venv / "bin" / "duckdb"), "--version"], capture_output=True, text=True)
    assert cli.returncode == 0 and "v1.5.5" in cli.stdout
