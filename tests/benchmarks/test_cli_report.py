"""`python -m benchmarks.cli`'s figures: ratios paired within a repetition, the goals, and
one history line per commit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import benchmarks.cli as cli
from benchmarks.cli import phases, plan
from benchmarks.cli_report import (
    HISTORY_PART,
    figures,
    history_line,
    record_history,
    render,
    standard,
)
from benchmarks.results_file import read_part

OUT = Path("/repo/benchmarks/RESULTS.md")
DETAILS = Path("/repo/docs/benchmarks-history.md")


def _run(wall: float, peak: float = 300.0) -> dict[str, Any]:
    return {"wall": wall, "cpu": wall / 2, "peak": peak, "expected": 2343, "served": 2344,
            "sync": wall * 0.8, "models": 0.0, "startup": 1.0, "fetch_loads": wall - 2.5,
            "seal": 0.5, "tail_models": 0.0, "exit": 1.0}


def raw(repeat: int = 3, commit: str = "abc1234") -> dict[str, Any]:
    """Two repetitions' worth of a standard run: replay 6 s; at 400, --no-models 7.5 s in
    the first repetition and 8 s in the others."""
    def runs(*walls: float, peak: float = 300.0) -> list[dict[str, Any]]:
        return [_run(w, peak) for w in walls]

    rest = (repeat - 1)
    return {
        "settings": {"repeat": repeat, "connections": [400, 2000], "memory": [200, 2000],
                     "latency_ms": 40.0, "scale": "small", "concurrency": 16, "replay": "threads"},
        "figures": {
            "200": {"whole": runs(*[10.0] * repeat, peak=400.0)},
            "400": {"replay": runs(*[6.0] * repeat), "no_models": runs(7.5, *[8.0] * rest),
                    "whole": runs(*[9.0] * repeat, peak=420.0), "no_evidence": runs(*[7.8] * repeat)},
            "2000": {"replay": runs(*[30.0] * repeat), "no_models": runs(*[32.0] * repeat),
                     "whole": runs(*[33.0] * repeat, peak=500.0)},
        },
        "load": {"start": "1.00 0.50 0.20", "after 2000": "2.00 1.00 0.50"},
        "machine": {"cpu": "a CPU", "cores": 2, "date": "2026-11-28 18:00 UTC"},
        "minutes": 12.0,
        "commit": {"hash": commit, "clean": True},
    }


def test_the_phases_come_from_when_the_lines_appeared() -> None:
    lines = [(2.5, "2026 INFO diligence.sync: namespace a: 0/6 requests, 0 rows"),
             (6.0, "2026 INFO diligence.sync: namespace a loaded: 865 rows"),
             (9.0, "2026 INFO diligence.sync: namespace b loaded: 801 rows"),
             (9.4, "ok     a: 614 requests, 865 rows, 1 sync issues, 6.2s"),
             (9.5, "synced 2/2 namespaces into w.duckdb in 9.8s"),
             (9.5, "evidence sealed: head b9e4"),
             (16.0, "models built in 6.10s: analytics.answers 7601"),
             (16.2, "all data checks passed; analysts' copy: w-analytics.duckdb")]
    assert phases(lines, 17.0) == {"startup": 2.5, "fetch_loads": 6.5, "seal": 0.5,
                                   "tail_models": 6.5, "exit": 17.0 - 16.2}
    assert phases(lines[:6], 10.0)["tail_models"] == 0.0


def test_each_size_runs_its_contenders_and_memory_sizes_reuse_the_whole_sync() -> None:
    assert plan([400, 2000], [200, 2000]) == {
        200: ["whole"], 400: ["replay", "no_models", "whole", "no_evidence"],
        2000: ["replay", "no_models", "whole"]}
    assert plan([400], [200, 400], ["replay", "no_models"], before=True) == {
        400: ["replay", "no_models", "no_models@before"]}


def test_the_code_before_has_its_own_figures_beside_this_trees() -> None:
    run = raw()
    run["settings"]["before"] = "`before-abc`"
    run["figures"]["400"]["no_models@before"] = [_run(10.0)] * 3
    (now,) = [f for f in figures(run) if f.key == "nm_first"]
    (then,) = figures(run, "@before")  # only the figure whose runs were made
    assert (now.median, then.key, then.median) == (0.75, "nm_first", 0.6)
    text, details = render(run, OUT, DETAILS)
    assert "the code before (`before-abc`)" in text
    assert "| **0.75** | 0.80 / 0.75 / 0.75 | **missed** | 0.60 | 0.60 / 0.60 / 0.60 |" in text
    assert "| `diligence sync --no-models`, before | 10.00 (10.00 / 10.00 / 10.00) |" in details


def test_ratios_are_paired_within_a_repetition_and_judged_on_their_median() -> None:
    by_key = {f.key: f for f in figures(raw())}
    assert by_key["nm_first"].values == [0.8, 0.75, 0.75]
    assert by_key["nm_first"].median == 0.75 and by_key["nm_first"].verdict == "**missed**"
    assert by_key["whole_last"].median == 30 / 33 and by_key["whole_last"].verdict == "**missed**"
    assert by_key["models_first"].median == 9.0 / 8.0 and by_key["models_first"].verdict == "met"
    assert abs(by_key["evidence"].median - (8.0 / 7.8 - 1)) < 1e-12
    assert by_key["memory"].median == 1.25 and by_key["memory"].verdict == "met"
    text, details = render(raw(), OUT, DETAILS)
    assert "| 400 connections, `sync --no-models` / bare replay | >= 0.85 | **0.75** | 0.80 / 0.75 / 0.75 |" in text
    assert ("[every contender of the whole diligence sync](../docs/benchmarks-history.md#"
            "every-contender-of-the-whole-diligence-sync)") in text
    assert details.startswith("## Every contender of the whole diligence sync\n")
    assert "[RESULTS.md](../benchmarks/RESULTS.md)" in details
    assert "| 2,000 (2,343) | `diligence sync` | 33.00 (33.00 / 33.00 / 33.00) | 16.50 | 500 | 1.00 / 30.50 / 0.50 / 0.00 (0.00) / 1.00 |" in details


def test_the_history_keeps_one_line_per_commit(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    out.write_text("# Results\n")
    assert standard(raw()) and not standard(raw(repeat=2))
    record_history(out, history_line(raw(commit="aaaaaaa")), "aaaaaaa")
    record_history(out, history_line(raw(commit="bbbbbbb")), "bbbbbbb")
    rerun = raw(commit="aaaaaaa")
    rerun["figures"]["400"]["no_models"] = [_run(6.5)] * 3
    record_history(out, history_line(rerun), "aaaaaaa")
    part = read_part(out, HISTORY_PART)
    assert part is not None
    rows = [row for row in part.splitlines() if row.startswith("| ") and not row.startswith("| commit")]
    assert [row.split(" | ")[0] for row in rows] == ["| aaaaaaa", "| bbbbbbb"]
    assert rows[0].startswith("| aaaaaaa | 2026-11-28 | 1.00-2.00 | 0.92 |")
    assert out.read_text().startswith("# Results\n")


def test_a_run_of_other_settings_leaves_the_goals_of_the_last_standard_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results, details = tmp_path / "RESULTS.md", tmp_path / "history.md"
    results.write_text("# Results\n<!-- cli:start -->\nthe last standard run\n<!-- cli:end -->\n")
    details.write_text("# History\n")
    monkeypatch.setattr(cli, "RESULTS", results)
    monkeypatch.setattr(cli, "DETAILS", details)
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps(raw(repeat=2)))
    work = tmp_path / "work"
    assert cli.main(["--render", str(partial), "--work-dir", str(work)]) == 0
    assert "the last standard run" in results.read_text() and details.read_text() == "# History\n"
    assert "| 400 connections, `sync --no-models` / bare replay |" in (work / "RESULTS.md").read_text()
    assert (work / "RESULTS-details.md").read_text().startswith("<!-- cli:start -->")
    # a standard run writes where it always did
    standard_run = tmp_path / "standard.json"
    standard_run.write_text(json.dumps(raw()))
    assert cli.main(["--render", str(standard_run), "--work-dir", str(work)]) == 0
    assert "the last standard run" not in results.read_text()
    assert "Every contender of the whole diligence sync" in details.read_text()
