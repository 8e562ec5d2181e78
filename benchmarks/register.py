"""What the register as of a date costs against the daily build.

``python -m benchmarks.register [--repeat 3] [--syncs 50]``

The synthetic `large` world (``tests.models.synthetic``: 11,500 questionnaires of 30
fields, 3 namespaces) with ``--syncs`` syncs of history and 2 % churn, built once
(twice: the history tables then have their spares). Per repetition, a copy of it gets
the next daily sync, then, in alternating order on that same copy:

* **present**: ``diligence models`` (the daily build, the history marts extended);
* **register**: ``diligence models --as-of <moment> --out FILE`` (the warehouse copied
  aside, every model built anew with the versions valid then, written into FILE), at the
  middle of the history and at its last sync (every version read: the costliest).

Each is the whole process (wall seconds, peak RSS); the figures are the ratios of the
medians. Writes the part ``register`` of ``benchmarks/RESULTS.md`` (raw figures:
``benchmarks/.work/register.json``).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb

from .growth import CHURN, _copy, _diligence, _in_child, _models, _remove
from .harness import ROOT, WORK_DIR, machine, median
from .results_file import publish

PART = "register"
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
WORK = WORK_DIR / "register"
GOAL = 1.5


def measure(syncs: int, repeat: int) -> dict[str, Any]:
    from tests.models.rawdb import SYNCED_AT
    from tests.models.synthetic import PROFILES, append_sync, generate_raw

    profile = PROFILES["large"]
    as_of = (SYNCED_AT + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%S")
    WORK.mkdir(parents=True, exist_ok=True)
    world = WORK / "world.duckdb"
    _remove(world)
    _in_child(generate_raw, world, profile.questionnaires, profile.fields_per_questionnaire,
              profile.namespaces, profile.company_types, syncs, CHURN)
    with duckdb.connect(str(world), read_only=True) as con:
        first, last, versions = con.execute(
            "select min(synced_at), max(synced_at), (select count(*) from raw.questionnaires) "
            "from raw.sync_runs").fetchone()  # type: ignore[misc]
    moments = {"middle": (first + (last - first) / 2).strftime("%Y-%m-%dT%H:%M:%S"),
               "last": as_of}  # after the next daily sync too: every version
    _models(ROOT, world, as_of)
    _models(ROOT, world, as_of)  # the history tables' spares, as a daily warehouse has them
    print(f"{syncs} syncs ({versions:,} questionnaire versions) built; registers as of {moments}", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {"present": [], "middle": [], "last": []}
    for number in range(repeat):
        copy = WORK / "run.duckdb"
        out = WORK / "register-out.duckdb"
        _remove(copy)
        _remove(out)
        _copy(world, copy)
        _in_child(append_sync, copy, CHURN)
        kinds = ["present", "middle", "last"]
        for kind in kinds if number % 2 == 0 else kinds[::-1]:
            if kind == "present":
                figures = _models(ROOT, copy, as_of)
            else:
                figures = _diligence(ROOT, ["models", "-w", str(copy), "--as-of", moments[kind], "--out", str(out)],
                                     copy.with_suffix(".register.log"))
                figures["bytes"] = out.stat().st_size
                _remove(out)
            runs[kind].append(figures)
            print(f"  #{number + 1} {kind}: {figures['wall']:.1f} s, {figures['peak_mb']:.0f} MB", flush=True)
        _remove(copy)
        _remove(out)
    _remove(world)
    return {"syncs": syncs, "questionnaire_versions": versions, "moments": moments, "runs": runs}


def render(results: dict[str, Any]) -> str:
    m, figures = results["machine"], results["register"]
    runs, moments = figures["runs"], figures["moments"]
    present = median([r["wall"] for r in runs["present"]])
    lines = [
        "## The register as of a date (`python -m benchmarks.register`)", "",
        f"{m['cpu']}, {m['date']}, load {m['load_before']} before and {m['load_average']} after; medians of "
        f"{results['repeat']}, the three alternating on the same copy. Synthetic `large` with "
        f"{figures['syncs']} syncs of history ({figures['questionnaire_versions']:,} questionnaire versions, "
        "2 % churn) and the next daily sync: the daily `diligence models` against `diligence models --as-of TS "
        "--out FILE`, each the whole process.", "",
        "| build | process | peak memory | / daily |", "|---|---:|---:|---:|",
        f"| daily (`models`) | {present:.1f} s | {median([r['peak_mb'] for r in runs['present']]):,.0f} MB | 1.00x |"]
    ratios = []
    for kind, words in (("middle", "the middle of the history"), ("last", "the last sync, every version")):
        wall = median([r["wall"] for r in runs[kind]])
        ratios.append(wall / present)
        lines.append(f"| register as of {moments[kind]} ({words}) | {wall:.1f} s | "
                     f"{median([r['peak_mb'] for r in runs[kind]]):,.0f} MB | {wall / present:.2f}x |")
    lines += ["", f"Register / daily build: at most **{max(ratios):.2f}x** (goal <= {GOAL}x)."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.register", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--syncs", type=int, default=50)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    load_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    results: dict[str, Any] = {"repeat": args.repeat, "register": measure(args.syncs, args.repeat)}
    m = machine()
    results["machine"] = {"cpu": m.cpu, "date": m.date, "load_average": m.load_average, "load_before": load_before}
    publish(results, WORK_DIR / "register.json", args.out, PART, render(results))
    print(render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
