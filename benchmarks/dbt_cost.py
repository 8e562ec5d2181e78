"""What building the models through dbt costs, side by side with the runner before it.

``python -m benchmarks.dbt_cost --before DIR [--repeat 3] [--scales medium large]``

`DIR` is a checkout of the code before the dbt project (e.g. ``git worktree add
/tmp/before-dbt d60926c``); both trees run with this venv's interpreter, each with its
own tree first on ``PYTHONPATH``. Every repetition runs BEFORE then AFTER, so both see
the same machine load; figures are medians. Three figures:

* **model build on `large`**: one synthetic raw layer (``tests.models.synthetic``,
  profile ``large``), copied fresh for each build; ``build_models`` and the checks
  timed in a child process (before: ``build_models`` then ``run_checks``; after:
  ``build_models``, whose ``dbt build`` runs the checks), after its imports and, for
  dbt, after its start-up (``prepare``: dbt's imports and the parse, timed apart), and
  the child's whole wall time (everything included);
* **dbt's start-up**: ``import dbt.cli.main``, and ``prepare`` on a fresh copy of
  ``sql/`` (a full parse) against one on a copy parsed before (dbt's partial parse);
* **the whole `diligence sync`** (CLI, one process) against a sandbox answering in
  40 ms, over a bare replay of its own requests (:mod:`benchmarks.ceiling`: the same
  URLs, same concurrency, known up front, bodies dropped): replay seconds / sync
  seconds, goal >= 0.80; for the tree before dbt, this tree, and this tree with
  ``--no-models`` (the sync alone), one after the other against one sandbox.

Writes the part ``dbt`` of ``benchmarks/RESULTS.md`` and the raw figures to
``benchmarks/.work/dbt_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .harness import EMAIL, PASSWORD, ROOT, WORK_DIR, child_env, machine, sandbox
from .results_file import write_part

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
LATENCY_MS = 40
CONCURRENCY = 16

BUILD_DRIVER = """
import json, sys, time
from datetime import datetime, timedelta, timezone
from pathlib import Path
begun = time.perf_counter()
try:
    from diligence.analytics.checks import run_checks
    from diligence.analytics.models import build_models
except ImportError:  # a tree from before diligence/ was in folders
    from diligence.checks import run_checks
    from diligence.models import build_models
imported = time.perf_counter()
kwargs = {"project_dir": Path(sys.argv[2])} if len(sys.argv) > 2 else {}
try:  # dbt's start-up (its imports and the parse), which a sync runs beside its fetch
    from diligence.analytics.dbt import prepare
    prepare("build", **kwargs)
except ImportError:  # a tree without it (the runner before dbt has no start-up)
    pass
started = time.perf_counter()
result = build_models(Path(sys.argv[1]), as_of=datetime(2026, 1, 2, tzinfo=timezone.utc), **kwargs)
built = time.perf_counter()
if not getattr(result, "checks", None):  # a build that does not run the checks itself
    run_checks(Path(sys.argv[1]))
checked = time.perf_counter()
print(json.dumps({"build": built - started, "checks": checked - built,
                  "build_and_checks": checked - started, "imports": imported - begun,
                  "startup": started - imported}))
"""

DBT_IMPORT_DRIVER = """
import json, time
started = time.perf_counter()
import dbt.cli.main  # noqa: F401
print(json.dumps({"import_dbt": time.perf_counter() - started}))
"""


def _child(code: str, args: list[str], tree: Path, env: dict[str, str] | None = None
           ) -> tuple[dict[str, Any], float]:
    """Run `code` with `tree` first on the path; (its JSON line, wall seconds)."""
    child = child_env() | (env or {})
    child["PYTHONPATH"] = str(tree)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], cwd=tree, env=child,
                          capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"child failed in {tree}:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def _raw_large(work: Path) -> Path:
    """The synthetic `large` raw layer, generated once per run of this script."""
    from tests.models.synthetic import PROFILES, generate_raw

    path = work / "raw-large.duckdb"
    path.unlink(missing_ok=True)
    profile = PROFILES["large"]
    generate_raw(path, profile.questionnaires, profile.fields_per_questionnaire,
                 profile.namespaces, profile.company_types, profile.syncs)
    return path


def _build(tree: Path, raw: Path, work: Path, project: Path | None = None) -> dict[str, float]:
    copy = work / f"build-{tree.name}.duckdb"
    shutil.copyfile(raw, copy)
    try:
        figures, wall = _child(BUILD_DRIVER, [str(copy)] + ([str(project)] if project else []), tree)
    finally:
        copy.unlink(missing_ok=True)
    return {**figures, "process": wall}


#: the syncs timed against each replay: (name, tree: "before" or "after", extra arguments)
SYNCS = (("before", "before", ()), ("sync", "after", ()), ("no_models", "after", ("--no-models",)))


def _sync_vs_replay(scale: str, before: Path, work: Path) -> dict[str, float]:
    """A bare replay of the sync's requests, then `diligence sync` (CLI) of the tree
    before dbt, of this tree, and of this tree with ``--no-models``, on one sandbox."""
    from . import ceiling

    with sandbox(scale, latency_ms=LATENCY_MS, log_dir=work) as box:
        figures: dict[str, float] = {}
        replay = ceiling.run({"base_url": box.base_url, "concurrency": CONCURRENCY})
        figures |= {"replay": replay["timings"]["fetch"], "replay_requests": replay["requests"]}
        for name, which, extra in SYNCS:
            tree = before if which == "before" else ROOT
            with tempfile.TemporaryDirectory(dir=work) as folder:
                env = child_env() | {
                    "PYTHONPATH": str(tree),
                    "SOURCES__COMPANY_CONNECTIONS__EMAIL": EMAIL,
                    "SOURCES__COMPANY_CONNECTIONS__PASSWORD": PASSWORD,
                    "SOURCES__COMPANY_CONNECTIONS__TOKEN_STORE_PATH": "",
                }
                box.reset_stats()
                started = time.perf_counter()
                subprocess.run([sys.executable, "-m", "diligence", "sync", "--base-url", box.base_url,
                                "--warehouse", str(Path(folder) / "sync.duckdb"),
                                "--max-concurrency", str(CONCURRENCY), *extra],
                               cwd=tree, env=env, check=True, capture_output=True, timeout=1800)
                figures[name] = time.perf_counter() - started
                figures[f"{name}_requests"] = box.stats()["total"]
    return figures


def _builds_and_startup(before: Path, repeat: int, work: Path
                        ) -> tuple[dict[str, list[dict[str, float]]], dict[str, list[float]]]:
    raw = _raw_large(work)
    builds: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for _ in range(repeat):
        builds["before"].append(_build(before, raw, work))
        builds["after"].append(_build(ROOT, raw, work))
    startup: dict[str, list[float]] = {"import_dbt": [], "cold": [], "warm": []}
    for _ in range(repeat):
        startup["import_dbt"].append(_child(DBT_IMPORT_DRIVER, [], ROOT)[0]["import_dbt"])
        with tempfile.TemporaryDirectory(dir=work) as tmp:
            project = Path(tmp) / "sql"
            shutil.copytree(ROOT / "sql", project, ignore=shutil.ignore_patterns("target"))
            startup["cold"].append(_build(ROOT, raw, work, project)["startup"])
            startup["warm"].append(_build(ROOT, raw, work, project)["startup"])
    raw.unlink(missing_ok=True)
    return builds, startup


def _median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(row[key] for row in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True,
                        help="checkout of the code before the dbt project")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scales", nargs="+", default=["medium", "large"],
                        help="sandbox scales of the sync figure")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--figures-from", type=Path,
                        help="a previous run's raw figures (JSON) to take the parts not rerun from")
    parser.add_argument("--only", choices=("builds", "syncs"),
                        help="rerun only these figures (the others come from --figures-from)")
    args = parser.parse_args(argv)
    if args.only and not args.figures_from:
        parser.error("--only needs --figures-from (where the other figures come from)")
    work = WORK_DIR / "dbt_cost"
    work.mkdir(parents=True, exist_ok=True)
    load = [os.getloadavg()[0]]

    previous = json.loads(args.figures_from.read_text()) if args.figures_from else {}
    if args.only == "syncs":
        builds, startup = previous["builds"], previous["startup"]
    else:
        builds, startup = _builds_and_startup(args.before.resolve(), args.repeat, work)
    if args.only == "builds":
        syncs = previous["syncs"]
    else:
        syncs = {scale: [_sync_vs_replay(scale, args.before.resolve(), work) for _ in range(args.repeat)]
                 for scale in args.scales}
    load.append(os.getloadavg()[0])

    figures = {"builds": builds, "startup": startup, "syncs": syncs, "load": load}
    (WORK_DIR / "dbt_cost.json").write_text(json.dumps(figures, indent=2))
    before, after = (_median(builds[k], "build") for k in ("before", "after"))
    before_p, after_p = (_median(builds[k], "process") for k in ("before", "after"))
    before_c, after_c = (_median(builds[k], "build_and_checks") for k in ("before", "after"))
    cold, warm = statistics.median(startup["cold"]), statistics.median(startup["warm"])
    startup_s = _median(builds["after"], "startup")
    m = machine()
    text = "\n".join([
        "## The models through dbt (`python -m benchmarks.dbt_cost`)",
        "",
        f"{m.cpu}, {m.date}, load average {load[0]:.1f} before and {load[1]:.1f} after; "
        f"medians of {args.repeat}, before (the runner of `{args.before.name}`) and after "
        "(dbt) alternating. Raw figures: `benchmarks/.work/dbt_cost.json`.",
        "",
        "| figure | before (own runner) | after (dbt) | ratio | goal |",
        "|---|---|---|---|---|",
        f"| models and checks on synthetic `large` | {before_c:.2f} s | {after_c:.2f} s | "
        f"{after_c / before_c:.2f}x | <= 1.5x |",
        f"| of which `build_models` (after: with the checks) | {before:.2f} s | {after:.2f} s | "
        f"{after / before:.2f}x | |",
        f"| dbt's start-up before it (imports, partial parse) | | {startup_s:.2f} s | | |",
        f"| the same, whole process (start-up and imports) | {before_p:.2f} s | "
        f"{after_p:.2f} s | {after_p / before_p:.2f}x | |",
        "",
        f"dbt's start-up: `import dbt.cli.main` {statistics.median(startup['import_dbt']):.2f} s; "
        f"imports and parse on a fresh copy of `sql/` (full parse) {cold:.2f} s against {warm:.2f} s "
        f"on a copy parsed before (partial parse, kept in `sql/target/`). A sync runs them "
        "in a background thread while it fetches (`diligence.analytics.warm_up`).",
        "",
        f"The whole `diligence sync` (CLI, one process) at {LATENCY_MS} ms per request, "
        f"{CONCURRENCY} in flight, against a bare replay of its requests (goal: replay / sync "
        ">= 0.80); before dbt, through dbt, and the sync alone (`--no-models`):",
        "",
        "| scale | requests | bare replay | before dbt | through dbt | sync alone (`--no-models`) |",
        "|---|---|---|---|---|---|",
        *(f"| `{scale}` | {_median(rows, 'sync_requests'):,.0f} | {_median(rows, 'replay'):.2f} s | "
          + " | ".join(f"{_median(rows, name):.2f} s = **{statistics.median(r['replay'] / r[name] for r in rows):.2f}**"
                       for name, _, _ in SYNCS) + " |"
          for scale, rows in syncs.items()),
    ])
    write_part(args.out, "dbt", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
