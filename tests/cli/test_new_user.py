"""What a new user hit on a fresh clone, each through the `diligence` command: a folder
given as the warehouse, a folder they cannot write, an unknown host, one exit code per
kind of error on every command, the hint after `make demo`, a mistyped namespace, and a
dbt profile merged into theirs."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import duckdb
import pytest
import yaml

from sandbox.server import SandboxServer

from .helpers import CREDENTIALS, error_lines, run


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_folder_given_as_the_warehouse_is_refused_and_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    for command in (["models"], ["sync", "--base-url", "http://127.0.0.1:9"], ["status"]):
        result = run([*command, "--warehouse", str(shared)], tmp_path, CREDENTIALS)
        assert result.returncode == 1, result.stderr
        (line,) = error_lines(result.stderr)
        assert line == (f"error: the warehouse {shared} is a folder: name a DuckDB file, "
                        f"e.g. {shared / 'warehouse.duckdb'}")
        assert mode(shared) == 0o755 and list(shared.iterdir()) == []


def test_a_folder_the_user_chose_keeps_its_mode_and_the_files_in_it_are_owner_only(
    server: SandboxServer, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    result = run(["sync", "--base-url", server.base_url, "-w", str(shared / "w.duckdb")],
                 tmp_path, CREDENTIALS)
    assert result.returncode == 0, result.stderr
    assert mode(shared) == 0o755  # "an existing folder the user chose keeps its mode"
    assert mode(shared / "w.duckdb") == mode(shared / "w-analytics.duckdb") == 0o600
    # the folders made here are owner-only
    assert mode(shared / ".dlt-pipelines") == 0o700


def test_a_folder_that_cannot_be_written_is_one_line_naming_it(tmp_path: Path) -> None:
    result = run(["sync", "--base-url", "http://127.0.0.1:9", "-w", "/sys/diligence.duckdb"],
                 tmp_path, CREDENTIALS)
    assert result.returncode == 1
    (line,) = error_lines(result.stderr)
    assert line.startswith("error: cannot write the warehouse /sys/diligence.duckdb in /sys: ")
    assert "OSError" not in line and "Traceback" not in result.stderr


def test_an_unknown_host_is_named_without_internals(tmp_path: Path) -> None:
    result = run(["check", "--base-url", "https://no-such-host.invalid"], tmp_path,
                 {**CREDENTIALS, "SOURCES__COMPANY_CONNECTIONS__MAX_ATTEMPTS": "1"})
    assert result.returncode == 1
    (line,) = error_lines(result.stderr)
    assert "cannot connect to no-such-host.invalid:443" in line and "check base_url" in line
    assert "SSLContext" not in line and " at 0x" not in line


def test_one_exit_code_per_kind_of_error_on_every_command(tmp_path: Path) -> None:
    missing = tmp_path / "missing.duckdb"
    for command in (["models"], ["export", "--out", "out"], ["report"], ["status"], ["docs"]):
        result = run([*command, "--warehouse", str(missing)], tmp_path)
        assert result.returncode == 2, (command, result.stderr)
        assert error_lines(result.stderr) == [
            f"error: no warehouse at {missing}; run `diligence sync --warehouse {missing}` first"], command
    raw_only = tmp_path / "raw-only.duckdb"
    with duckdb.connect(str(raw_only)) as con:
        con.execute("create schema raw; create table raw.sync_runs (sync_id varchar)")
    for command in (["export", "--out", "out"], ["report"]):
        result = run([*command, "--warehouse", str(raw_only)], tmp_path)
        assert result.returncode == 2, (command, result.stderr)
        (line,) = error_lines(result.stderr)
        assert f"run `diligence models --warehouse {raw_only}` first" in line, command


def test_the_hint_after_the_demo_names_its_warehouse(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    duckdb.connect(str(tmp_path / "data" / "demo.duckdb")).close()
    result = run(["models"], tmp_path)
    assert result.returncode == 2
    assert error_lines(result.stderr) == [
        "error: no warehouse at data/warehouse.duckdb; run `diligence sync` first "
        "(`diligence demo` wrote data/demo.duckdb: pass --warehouse data/demo.duckdb)"
    ]


def test_a_mistyped_namespace_is_named_with_the_valid_ones_and_not_recorded(
    server: SandboxServer, tmp_path: Path
) -> None:
    result = run(["sync", "--base-url", server.base_url, "-w", "w.duckdb", "-n", "not a uuid; drop"],
                 tmp_path, CREDENTIALS)
    assert result.returncode == 1
    (line,) = error_lines(result.stderr)
    assert line == ("error: unknown namespace 'not a uuid; drop': not one of the user's companies "
                    "and never synced into this warehouse; user-info lists: "
                    + ", ".join(server.world.namespaces))
    assert not (tmp_path / "w.duckdb").exists()  # nothing read, no namespace recorded
    good = run(["sync", "--base-url", server.base_url, "-w", "w.duckdb", "--no-models"],
               tmp_path, CREDENTIALS)
    assert good.returncode == 0, good.stderr
    status = run(["status", "-w", "w.duckdb", "--json"], tmp_path)
    data = json.loads(status.stdout)
    assert sorted(n["namespace_company_id"] for n in data["namespaces"]) == sorted(server.world.namespaces)
    assert data["failed_attempts"] == [] and "not a uuid" not in status.stdout


@pytest.mark.parametrize("existing", ["other: {target: dev, outputs: {}}\n", None])
def test_dbt_profile_is_merged_into_the_users_profiles(tmp_path: Path, existing: str | None) -> None:
    profiles = tmp_path / "home" / ".dbt" / "profiles.yml"
    if existing is not None:
        profiles.parent.mkdir(parents=True)
        profiles.write_text(existing)
    result = run(["dbt-profile", "-w", "w.duckdb", "--out", str(profiles)], tmp_path)
    assert result.returncode == 0, result.stderr
    merged = yaml.safe_load(profiles.read_text())
    assert merged["diligence"]["target"] == "analytics"
    assert ("other" in merged) == (existing is not None)  # the user's own profiles are kept
    again = run(["dbt-profile", "-w", "w.duckdb", "--out", str(profiles)], tmp_path)
    assert again.returncode == 0 and yaml.safe_load(profiles.read_text()) == merged
    broken = tmp_path / "broken.yml"
    broken.write_text("- a list, not profiles\n")
    refused = run(["dbt-profile", "--out", str(broken)], tmp_path)
    assert refused.returncode == 1 and "nothing was written" in refused.stderr
    assert broken.read_text() == "- a list, not profiles\n"
