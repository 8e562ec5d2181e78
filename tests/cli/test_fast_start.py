"""The CLI answers at once: --help, -h and --version import none of the heavy libraries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DILIGENCE = Path(sys.executable).with_name("diligence")
HEAVY = ("dlt", "duckdb", "pyarrow", "prefect", "pandas", "sqlglot")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(DILIGENCE), *args], capture_output=True, text=True, timeout=60,
                          cwd=ROOT)


def test_version_and_short_help() -> None:
    version = _run("--version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == "diligence 0.1.0"
    short, long = _run("-h"), _run("--help")
    assert short.returncode == long.returncode == 0
    assert short.stdout == long.stdout
    assert "sync" in short.stdout and "--version" in short.stdout


def test_help_imports_no_heavy_library() -> None:
    """What `diligence --help` and `--version` load: typer and rich, not dlt and friends."""
    code = (
        "import sys\n"
        "from diligence.cli import app\n"
        "for argv in (['--help'], ['--version']):\n"
        "    try:\n"
        "        app(argv, prog_name='diligence')\n"
        "    except SystemExit as exit:\n"
        "        assert exit.code == 0, exit.code\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"
    imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:")}
    assert "diligence.cli" in imported and "typer" in imported
    assert not imported & set(HEAVY), imported & set(HEAVY)
