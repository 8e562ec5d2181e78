"""The figures of :mod:`benchmarks.cli`: paired ratios, goals, the table and the history.

Every ratio is taken within one repetition (the runs that sat side by side) and the
figure is the median of those ratios:

* throughput against the replay: replay seconds / sync seconds (1 = as fast as the
  bare GETs);
* what the models add: whole sync seconds / ``--no-models`` sync seconds;
* what the evidence costs: ``--no-models`` seconds / the same with the evidence off, - 1;
* memory: the whole sync's peak RSS at the larger ``--memory`` size / at the smaller.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .results_file import read_part, write_part

PART = "cli"
HISTORY_PART = "cli-history"
#: the settings whose runs go into the history (so that its lines compare)
STANDARD = {"connections": [400, 2000], "memory": [200, 2000], "latency_ms": 40.0,
            "concurrency": 16}

__all__ = ["DETAILS_HEADING", "HISTORY_PART", "PART", "figures", "history_line", "record_history",
           "render", "standard"]

Runs = list[dict[str, Any]]


@dataclass(frozen=True)
class Figure:
    """One paired ratio: its median, each repetition's value, and its goal if it has one."""

    key: str
    label: str
    values: list[float]
    goal: str = ""
    met: Callable[[float], bool] | None = None
    percent: bool = False

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    def show(self, value: float) -> str:
        return f"{value:+.1%}" if self.percent else f"{value:.2f}"

    @property
    def verdict(self) -> str:
        if self.met is None or not self.values:
            return ""
        return "met" if self.met(self.median) else "**missed**"


def _paired(a: Runs, b: Runs, key: str = "wall") -> list[float]:
    """a[i][key] / b[i][key] for each repetition i."""
    return [x[key] / y[key] for x, y in zip(a, b, strict=True)]


#: key, label ({first}, {last}, {low}, {high}: the sizes), numerator (size, contender),
#: denominator (size, contender), the runs' figure compared, goal, its test, and whether
#: the figure is a cost (the ratio - 1, shown as a percentage)
SPECS: tuple[tuple[str, str, tuple[str, str], tuple[str, str], str, str,
                   Callable[[float], bool] | None, bool], ...] = (
    ("nm_first", "{first:,} connections, `sync --no-models` / bare replay",
     ("first", "replay"), ("first", "no_models"), "wall", ">= 0.85", lambda v: v >= 0.85, False),
    ("whole_last", "{last:,} connections, whole `sync` / bare replay",
     ("last", "replay"), ("last", "whole"), "wall", ">= 0.92", lambda v: v >= 0.92, False),
    ("models_first", "{first:,} connections, whole `sync` time / `--no-models` time",
     ("first", "whole"), ("first", "no_models"), "wall", "<= 1.25", lambda v: v <= 1.25, False),
    ("evidence", "evidence: `--no-models` time with it / without it - 1 ({first:,})",
     ("first", "no_models"), ("first", "no_evidence"), "wall", "<= +5 %", lambda v: v <= 0.05, True),
    ("memory", "peak RSS of the whole `sync`, {high:,} / {low:,} connections",
     ("high", "whole"), ("low", "whole"), "peak", "<= 1.5x", lambda v: v <= 1.5, False),
    ("whole_first", "{first:,} connections, whole `sync` / bare replay",
     ("first", "replay"), ("first", "whole"), "wall", "", None, False),
    ("nm_last", "{last:,} connections, `sync --no-models` / bare replay",
     ("last", "replay"), ("last", "no_models"), "wall", "", None, False),
    ("models_last", "{last:,} connections, whole `sync` time / `--no-models` time",
     ("last", "whole"), ("last", "no_models"), "wall", "", None, False),
)
#: the suffix of a contender of the code before (``--before``); the replay has none
BEFORE = "@before"


def figures(raw: dict[str, Any], tree: str = "") -> list[Figure]:
    """The paired ratios of a run, goals first, for this tree's syncs (`tree` ""), or
    for those of the tree before (:data:`BEFORE`); a figure whose runs were not made
    (``--contenders``) is left out."""
    settings = raw["settings"]
    sizes = {"first": settings["connections"][0], "last": settings["connections"][-1],
             "low": settings["memory"][0], "high": settings["memory"][1]}
    at = {int(size): by_name for size, by_name in raw["figures"].items()}

    def runs(size: str, name: str) -> Runs | None:
        return at.get(sizes[size], {}).get(name if name == "replay" else name + tree)

    out = []
    for key, label, top, bottom, what, goal, met, cost in SPECS:
        a, b = runs(*top), runs(*bottom)
        if a and b:
            values = _paired(a, b, what)
            out.append(Figure(key, label.format(**sizes), [v - 1 for v in values] if cost else values,
                              goal, met, cost))
    return out


def _med(runs: Runs, key: str) -> float:
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else float("nan")


PHASES = ("startup", "fetch_loads", "seal", "tail_models", "exit")
LABELS = {"replay": "bare replay (login to the last body)",
          "no_models": "`diligence sync --no-models`", "whole": "`diligence sync`",
          "no_evidence": "`diligence sync --no-models`, evidence off"}


#: the heading of the run's part of the details file (the results file links to it)
DETAILS_HEADING = "Every contender of the whole diligence sync"


def render(raw: dict[str, Any], out: Path, details: Path) -> tuple[str, str]:
    """The run's two parts: for `out` (RESULTS.md) the goals and every paired ratio, for
    `details` every contender's medians and where its wall time went."""
    s, m, commit = raw["settings"], raw["machine"], raw["commit"]
    replay = ("16 threads sharing one `httpx.Client`" if s["replay"] == "threads"
              else "one `httpx.AsyncClient`").replace("16", str(s["concurrency"]))
    load = "; ".join(f"{when} {value}" for when, value in raw["load"].items())
    link = Path(os.path.relpath(details, out.parent)).as_posix()
    anchor = DETAILS_HEADING.lower().replace(" ", "-")
    where = (f"{m['date']}, commit {commit['hash']}{'' if commit['clean'] else ' with uncommitted changes'}, "
             f"{m['cpu']} ({m['cores']} cores), load average {load}; {raw['minutes']:.0f} min.")
    lines = [
        "## The whole `diligence sync` beside a bare replay (`python -m benchmarks.cli`)",
        "",
        f"{where} Sandbox `{s['scale']}` with `--connections N` and {s['latency_ms']:g} ms per answer "
        f"(its own process), {s['concurrency']} requests in flight; the replay: {replay}, every URL "
        f"known up front, timed from its login to its last body. Each `diligence sync` is a process "
        f"timed from exec to exit into a new warehouse. {s['repeat']} repetitions, the contenders in "
        f"turn (reversed every other repetition); figures are medians of the ratios paired within "
        f"a repetition. Every contender's times and phases: [{DETAILS_HEADING.lower()}]({link}#{anchor}).",
        "",
    ]
    before = {f.key: f for f in figures(raw, BEFORE)}
    if before:
        lines += [f"Beside this tree's syncs, in the same repetitions: those of the code before "
                  f"({s['before']}), each run like this tree's, with that tree first on the path.", ""]
    lines += ["| figure | goal | median | each repetition | verdict |"
              + (" before: median | each |" if before else ""),
              "|---|---|---:|---|---|" + ("---:|---|" if before else "")]
    for f in figures(raw):
        then = before.get(f.key)
        lines.append(f"| {f.label} | {f.goal} | **{f.show(f.median)}** | "
                     f"{' / '.join(f.show(v) for v in f.values)} | {f.verdict} |"
                     + (f" {then.show(then.median)} | {' / '.join(then.show(v) for v in then.values)} |"
                        if then else ""))
    back = Path(os.path.relpath(out, details.parent)).as_posix()
    table = [f"## {DETAILS_HEADING}", "",
             f"The contenders of the run whose goals top [{out.name}]({back}): {where} Raw figures: "
             "`benchmarks/.work/cli/cli.json`.", "",
             "| connections (requests) | contender | wall s | CPU s | peak RSS MB | "
             "start-up / fetch and loads / seal / models, checks, copy (dbt build) / exit s |",
             "|---|---|---:|---:|---:|---|"]
    for size, by_name in raw["figures"].items():
        for name, runs in by_name.items():
            phases = "" if name == "replay" else (
                " / ".join(f"{_med(runs, key):.2f}" for key in PHASES[:4])
                + f" ({_med(runs, 'models'):.2f}) / {_med(runs, 'exit'):.2f}")
            walls = " / ".join(f"{r['wall']:.2f}" for r in runs)
            label = LABELS[name.removesuffix(BEFORE)] + (", before" if name.endswith(BEFORE) else "")
            table.append(f"| {int(size):,} ({runs[0]['expected']:,}) | {label} | "
                         f"{_med(runs, 'wall'):.2f} ({walls}) | {_med(runs, 'cpu'):.2f} | "
                         f"{_med(runs, 'peak'):.0f} | {phases} |")
    table += ["", "Phases (medians), by when the sync's lines appeared: the start-up to its first "
              "progress line (user-info answered, the first requests planned), the fetch and "
              "the loads to the last `namespace ... loaded`, the seal to `synced N/N`, the "
              "models, checks and analysts' copy to `models built` (in brackets the dbt build "
              "as the JSON summary times it), the exit after the last line. The replay's CPU "
              "is its fetch's; its peak RSS is its whole process's."]
    return "\n".join(lines), "\n".join(table)


HISTORY_KEYS = ("nm_first", "whole_first", "nm_last", "whole_last", "models_first", "evidence", "memory")
HISTORY_HEADER = (
    "## `python -m benchmarks.cli`: one line per commit that changed the figures\n\n"
    "Medians of paired ratios, standard settings (400 and 2,000 connections, 40 ms, 16 in "
    "flight; memory from 200 to 2,000). Goals: 400 `--no-models` >= 0.85, 2,000 whole >= 0.92, "
    "whole / `--no-models` <= 1.25, evidence <= +5 %, memory <= 1.5x.\n\n"
    "| commit | date | load | 400 `--no-models` / replay | 400 whole / replay | "
    "2,000 `--no-models` / replay | 2,000 whole / replay | 400 whole / `--no-models` | "
    "evidence | memory 200 -> 2,000 |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|")


def history_line(raw: dict[str, Any]) -> str:
    """This run's line of the history table."""
    by_key = {f.key: f for f in figures(raw)}
    cells = [by_key[k].show(by_key[k].median) for k in HISTORY_KEYS]
    load = list(raw["load"].values())
    return (f"| {raw['commit']['hash']} | {raw['machine']['date'][:10]} | {load[0].split()[0]}"
            f"-{load[-1].split()[0]} | " + " | ".join(cells) + " |")


def standard(raw: dict[str, Any]) -> bool:
    """Whether the run's settings are the history's (every contender, at least 3
    repetitions)."""
    s = raw["settings"]
    return (s["repeat"] >= 3 and s.get("contenders") is None
            and all(s[k] == v for k, v in STANDARD.items()))


def record_history(out: Path, line: str, commit: str) -> None:
    """Add `line` to the history part of `out`, or put it in the place of the line
    `commit` had there (a rerun of the same code)."""
    current = read_part(out, HISTORY_PART)
    rows = [] if current is None else [
        row for row in current.split("|---|", 1)[-1].splitlines()[1:] if row.startswith("| ")]
    ours = f"| {commit} |"
    rows = ([line if row.startswith(ours) else row for row in rows]
            if any(row.startswith(ours) for row in rows) else [*rows, line])
    write_part(out, HISTORY_PART, HISTORY_HEADER + "\n" + "\n".join(rows))
