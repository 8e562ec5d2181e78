"""Every export kept: `diligence export` writes a new folder per run under reports/,
`latest` names the newest, `[exports] keep` prunes the oldest; `--out DIR` is replaced
whole, or left as it was when the export fails."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from diligence.analytics.models import build_models
from diligence.report import export as export_module
from diligence.report.folders import LATEST, RUN_FOLDER, ExportFolder, latest_run, prune_runs

from ..models.rawdb import AS_OF, SYNCED_AT, connection, create_raw, insert, sync_run
from .helpers import error_lines, run

SYNC_ID = "20260110T060000123456Z"
CSV_FILES = {f"{report}.csv" for report in export_module.REPORTS}


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A modelled warehouse whose last successful sync is SYNC_ID."""
    path = create_raw(tmp_path_factory.mktemp("export-folders") / "w.duckdb")
    insert(path, "connections", [connection("ns", "c1", "Acme", received=["t1"])])
    insert(path, "sync_runs", [sync_run(SYNC_ID, "ns", SYNCED_AT)])
    build_models(path, as_of=AS_OF)
    return path


def _export(warehouse: Path, folder: Path, *extra: str, env: dict[str, str] | None = None) -> list[str]:
    result = run(["export", "--format", "csv", "-w", str(warehouse), *extra], folder, env)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def _runs(root: Path) -> list[str]:
    return sorted(name for name in os.listdir(root) if RUN_FOLDER.fullmatch(name))


def _folder(lines: list[str]) -> Path:
    """The one folder the printed files are in."""
    (folder,) = {Path(line.split()[0]).parent for line in lines}
    return folder


def test_two_exports_in_a_row_keep_two_folders_and_latest_names_the_second(warehouse: Path,
                                                                           tmp_path: Path) -> None:
    printed = [_folder(_export(warehouse, tmp_path)) for _ in range(2)]
    root = tmp_path / "reports"
    runs = _runs(root)
    assert printed == [Path("reports") / name for name in runs]  # each run printed its own folder
    assert [RUN_FOLDER.fullmatch(name)["sync"] for name in runs] == [SYNC_ID, SYNC_ID]  # type: ignore[index]
    assert sorted(os.listdir(root)) == sorted([*runs, LATEST])
    assert os.readlink(root / LATEST) == runs[-1]  # relative, so the reports can move
    assert latest_run(root) == root / runs[-1]
    for name in runs:
        assert set(os.listdir(root / name)) == CSV_FILES
        assert stat.S_IMODE(os.lstat(root / name).st_mode) == 0o700  # confidential: owner only


def test_keep_2_leaves_the_two_newest_of_three_runs(warehouse: Path, tmp_path: Path) -> None:
    printed = [_folder(_export(warehouse, tmp_path, env={"EXPORTS__KEEP": "2"})) for _ in range(3)]
    root = tmp_path / "reports"
    assert [Path("reports") / name for name in _runs(root)] == printed[1:]
    assert latest_run(root) == tmp_path / printed[2]


def test_a_bad_keep_is_one_line_naming_the_key_and_its_variable_exit_2(warehouse: Path,
                                                                       tmp_path: Path) -> None:
    for value, why in (("0", "input should be greater than 0"),
                       ("ten", "input should be a valid integer, unable to parse string as an integer")):
        result = run(["export", "-w", str(warehouse)], tmp_path, {"EXPORTS__KEEP": value})
        assert (result.returncode, error_lines(result.stderr)) == (
            2, [f"error: [exports] keep = '{value}': {why} (set by EXPORTS__KEEP)"])
    assert not (tmp_path / "reports").exists()


def test_the_run_folder_is_named_after_the_start_in_utc_and_the_sync(tmp_path: Path) -> None:
    started = datetime(2026, 11, 28, 7, 15, 0, tzinfo=UTC)
    with ExportFolder(None, root=tmp_path, sync_id=SYNC_ID, keep=30, started=started) as building:
        (building / "answers.csv").write_text("a\n")
    assert os.listdir(tmp_path / f"2026-11-28T071500Z-{SYNC_ID}") == ["answers.csv"]
    with ExportFolder(None, root=tmp_path, sync_id=None, keep=30, started=started) as building:
        (building / "answers.csv").write_text("b\n")
    assert latest_run(tmp_path) == tmp_path / "2026-11-28T071500Z-no-sync-id"
    with ExportFolder(None, root=tmp_path, sync_id="../../etc", keep=30, started=started) as building:
        (building / "answers.csv").write_text("c\n")
    assert latest_run(tmp_path) == tmp_path / "2026-11-28T071500Z-no-sync-id-2"  # only sync ids are names


def test_where_links_cannot_be_made_latest_is_a_file_naming_the_folder(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(*_: object, **__: object) -> None:
        raise OSError("links are not supported here")

    monkeypatch.setattr(os, "symlink", no_links)
    for _ in range(2):
        with ExportFolder(None, root=tmp_path, sync_id=SYNC_ID, keep=30) as building:
            (building / "answers.csv").write_text("a\n")
    newest = _runs(tmp_path)[-1]
    assert not (tmp_path / LATEST).is_symlink()
    assert (tmp_path / LATEST).read_text() == f"{newest}\n"
    assert latest_run(tmp_path) == tmp_path / newest


def test_a_failed_export_leaves_no_run_folder_and_latest_as_it_was(tmp_path: Path) -> None:
    with ExportFolder(None, root=tmp_path, sync_id=SYNC_ID, keep=30) as building:
        (building / "answers.csv").write_text("a\n")
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(RuntimeError), ExportFolder(None, root=tmp_path, sync_id=SYNC_ID, keep=30) as building:
        (building / "answers.csv").write_text("half")
        raise RuntimeError("disk gone")
    assert sorted(os.listdir(tmp_path)) == before
    assert latest_run(tmp_path) == tmp_path / before[0]


def _dead_pid() -> int:
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_what_a_killed_export_left_goes_with_the_next_export_and_a_running_ones_stays(tmp_path: Path) -> None:
    root, out = tmp_path / "reports", tmp_path / "out"
    dead, alive = _dead_pid(), os.getpid()
    killed = [root / f".2026-11-28T101500Z-{SYNC_ID}.partial-{dead}-0123abcd",
              tmp_path / f".out.new-{dead}-0123abcd", out / f".export.partial-{dead}-0123abcd"]
    running = [root / f".2026-11-28T101500Z-{SYNC_ID}.partial-{alive}-0123abcd",
               tmp_path / f".out.new-{alive}-0123abcd"]
    for folder in [*killed, *running]:
        folder.mkdir(parents=True)
        (folder / "answers.csv").write_text("half")
    with ExportFolder(None, root=root, sync_id=SYNC_ID, keep=30) as building:
        (building / "answers.csv").write_text("a\n")
    with ExportFolder(out, root=root, sync_id=SYNC_ID, keep=30) as building:  # out held only the leftover
        (building / "answers.csv").write_text("a\n")
    assert not any(folder.exists() for folder in killed)
    assert all(folder.exists() for folder in running)
    assert sorted(os.listdir(out)) == ["answers.csv"]


def test_pruning_never_touches_other_names_files_or_what_links_point_to(tmp_path: Path) -> None:
    root, outside = tmp_path / "reports", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "precious.csv").write_text("keep me")
    old = ["2020-01-01T000000Z-no-sync-id", f"2020-01-02T000000Z-{SYNC_ID}", f"2020-01-02T000000Z-{SYNC_ID}-2"]
    for name in old:
        (root / name).mkdir()
        (root / name / "answers.csv").write_text("old")
    os.symlink(outside / "precious.csv", root / old[0] / "link.csv")  # inside an old run folder
    os.symlink(outside, root / "2019-01-01T000000Z-no-sync-id")  # a link named like a run folder
    (root / "2019-01-02T000000Z-no-sync-id").write_text("a file named like one")
    for other in ("notes", "2019-01-03T00:00:00Z-no-sync-id", "2019-01-03T000000Z-no-sync-id-1",
                  "2019-01-03T000000Z-no-sync-id ", ".2019-01-03T000000Z-no-sync-id"):
        (root / other).mkdir()
    (root / "2026-01-01T000000Z-no-sync-id").mkdir()  # the newest

    removed = prune_runs(root, 1, current="2026-01-01T000000Z-no-sync-id")

    assert sorted(p.name for p in removed) == sorted(old)
    assert (outside / "precious.csv").read_text() == "keep me"
    assert os.readlink(root / "2019-01-01T000000Z-no-sync-id") == str(outside)
    assert (root / "2019-01-02T000000Z-no-sync-id").read_text() == "a file named like one"
    assert {"notes", "2019-01-03T00:00:00Z-no-sync-id", "2019-01-03T000000Z-no-sync-id-1",
            "2019-01-03T000000Z-no-sync-id ", ".2019-01-03T000000Z-no-sync-id",
            "2026-01-01T000000Z-no-sync-id"} <= set(os.listdir(root))


def test_pruning_keeps_the_folder_just_written_whatever_its_name_says(tmp_path: Path) -> None:
    for name in ("2030-01-01T000000Z-no-sync-id", "2031-01-01T000000Z-no-sync-id"):
        (tmp_path / name).mkdir()
    started = datetime(2026, 1, 1, tzinfo=UTC)  # a clock set back
    with ExportFolder(None, root=tmp_path, sync_id=None, keep=1, started=started) as building:
        (building / "answers.csv").write_text("a\n")
    assert _runs(tmp_path) == ["2026-01-01T000000Z-no-sync-id", "2031-01-01T000000Z-no-sync-id"]
    assert latest_run(tmp_path) == tmp_path / "2026-01-01T000000Z-no-sync-id"


def test_out_is_replaced_whole(warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "answers_wide.parquet").write_text("stale, from an earlier export")
    lines = _export(warehouse, tmp_path, "--out", "out")
    assert set(os.listdir(out)) == CSV_FILES  # the stale file is gone
    assert {Path(line.split()[0]).parent for line in lines} == {Path("out")}
    assert sorted(os.listdir(tmp_path)) == ["out"]  # no run folder, no latest, nothing left beside


def test_a_failing_export_leaves_out_as_it_was(warehouse: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    _export(warehouse, tmp_path, "--out", "out")
    before = {name: (out / name).read_bytes() for name in os.listdir(out)}
    (out / "answers.csv").write_text("the old content")
    before["answers.csv"] = b"the old content"
    written = export_module._export_one

    def fails_on_the_third(con: object, report: str, *args: object, **kwargs: object) -> int:
        if report == "questionnaire_completeness":
            raise OSError(28, "No space left on device")
        return written(con, report, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(export_module, "_export_one", fails_on_the_third)
    result = run(["export", "--format", "csv", "-w", str(warehouse), "--out", "out"], tmp_path)
    assert result.returncode == 1
    assert {name: (out / name).read_bytes() for name in os.listdir(out)} == before
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_out_holding_anything_but_an_export_is_refused_and_left_alone(warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "shared"
    out.mkdir()
    (out / "answers.csv").write_text("an earlier export")
    (out / "notes.txt").write_text("someone's notes")
    result = run(["export", "--format", "csv", "-w", str(warehouse), "--out", "shared"], tmp_path)
    assert result.returncode == 2
    assert error_lines(result.stderr) == [
        "error: --out shared holds more than an earlier export (notes.txt): name a new or empty folder, "
        "or one with an earlier export only (it is replaced whole)"]
    assert sorted(os.listdir(out)) == ["answers.csv", "notes.txt"]
    assert (out / "answers.csv").read_text() == "an earlier export"


def test_an_empty_out_keeps_its_place_and_mode(warehouse: Path, tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    os.chmod(out, 0o750)
    inode = out.stat().st_ino
    _export(warehouse, tmp_path, "--out", "mine")
    assert set(os.listdir(out)) == CSV_FILES
    assert (out.stat().st_ino, out.stat().st_mode & 0o777) == (inode, 0o750)
