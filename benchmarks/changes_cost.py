"""What the change feed (`analytics.changes`) costs in the model build, on `large`.

``python -m benchmarks.changes_cost [--repeat 3]``

One synthetic raw layer (``tests.models.synthetic``, profile ``large``: 3 namespaces,
about 11,500 questionnaires of 30 fields, five syncs of history), copied fresh for each
build; ``build_models`` in this process after a warm-up build (dbt's imports and parse
paid once). Per build: the build's wall seconds and dbt's own seconds for the node
``changes``; the goal is at most 10 % of the build. Writes the part ``changes`` of
``benchmarks/RESULTS.md`` and the raw figures to ``benchmarks/.work/changes_cost.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from datetime import timedelta
from pathlib import Path

from .harness import WORK_DIR, machine
from .results_file import write_part

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
GOAL = 0.10


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    from diligence.analytics.models import build_models
    from tests.models.rawdb import SYNCED_AT
    from tests.models.synthetic import PROFILES, generate_raw

    work = WORK_DIR / "changes_cost"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    profile = PROFILES["large"]
    raw = generate_raw(work / "large.duckdb", profile.questionnaires, profile.fields_per_questionnaire,
                       profile.namespaces, profile.company_types, profile.syncs)
    load = os.getloadavg()[0]
    runs = []
    for index in range(args.repeat + 1):  # the first builds once to pay dbt's start-up
        copy = work / f"build-{index}.duckdb"
        shutil.copyfile(raw, copy)
        started = time.perf_counter()
        result = build_models(copy, as_of=SYNCED_AT + timedelta(days=1))
        wall = time.perf_counter() - started
        rows = result.row_counts.get("analytics.changes", 0)
        if index:
            runs.append({"build": wall, "changes": result.timings["analytics.changes"], "rows": rows,
                         "nodes": sum(result.timings.values())})
        copy.unlink()
    shutil.rmtree(work, ignore_errors=True)
    build = statistics.median(r["build"] for r in runs)
    changes = statistics.median(r["changes"] for r in runs)
    share = statistics.median(r["changes"] / r["build"] for r in runs)
    (WORK_DIR / "changes_cost.json").write_text(json.dumps({"runs": runs}, indent=1))
    m = machine()
    text = f"""## The change feed in the build (`python -m benchmarks.changes_cost`)

{m.cpu}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load:.1f}; synthetic `large` ({profile.questionnaires:,} questionnaires x {profile.fields_per_questionnaire} fields, {profile.syncs} syncs of history), median of {len(runs)} builds after a warm-up.

| build (wall) | `changes` node | share | goal | change rows |
|---:|---:|---:|---|---:|
| {build:.2f} s | {changes:.2f} s | **{share:.1%}** | <= {GOAL:.0%} | {runs[0]['rows']:,} |
"""
    write_part(args.out, "changes", text)
    print(text)
    return 0 if share <= GOAL else 1


if __name__ == "__main__":
    raise SystemExit(main())
