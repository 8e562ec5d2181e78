"""The CLI answers at once: --help, -h and --version import none of the heavy libraries,
`export` none it does not use, and no process imports pandas, which is not installed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from diligence.logs import LazySecrets
from pipelines.secrets import redact

from .helpers import SyncedFolder

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


def test_pandas_is_not_installed() -> None:
    """Where pandas is installed, pyarrow imports it at its first conversion of Python rows
    and DuckDB at its first bound parameter: 0.3 s of CPU holding the GIL in every sync,
    export and models process, for nothing of ours. No dependency of the lock brings it."""
    assert importlib.util.find_spec("pandas") is None


def test_export_loads_neither_the_source_nor_pandas(synced_folder: SyncedFolder, tmp_path: Path) -> None:
    """`export` reads the warehouse and one setting: it never imports the source package
    (whose import looks up the secrets to mask, about half a second of its start-up)."""
    warehouse = synced_folder.copy(tmp_path)
    code = (
        "import sys\n"
        "from diligence.cli import app\n"
        "try:\n"
        f"    app(['export', '--format', 'csv', '--out', 'out', '-w', {str(warehouse)!r}], "
        "prog_name='diligence')\n"
        "except SystemExit as exit:\n"
        "    assert exit.code == 0, exit.code\n"
        "print(sorted(m for m in ('pipelines.company_connections', 'pandas') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
    assert (tmp_path / "out" / "answers.csv").exists()


def test_secrets_are_looked_up_once_when_first_masked() -> None:
    looked_up: list[int] = []

    def lookup() -> list[str | None]:
        looked_up.append(1)
        return ["configured-pw", None]

    secrets = LazySecrets(lookup)
    secrets.add("typed-pw")
    assert looked_up == []  # nothing masked yet
    line = "login configured-pw / typed-pw failed"
    assert redact(line, secrets) == "login *** / *** failed"
    assert redact(line, secrets) == "login *** / *** failed"
    assert looked_up == [1]
