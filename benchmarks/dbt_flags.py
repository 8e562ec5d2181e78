"""Which dbt flags lower the model build's fixed cost: the build with each, side by side.

``python -m benchmarks.dbt_flags [--repeat 5]``

One process, dbt imported and the project parsed first (as a sync's warm-up does); the
synthetic `large` raw layer (:mod:`tests.models.synthetic`) built once, then the
build's own ``dbt build`` (target ``build``, unit tests excluded, as
:func:`diligence.analytics.models.build_models` runs it) with each variant of flags,
variants alternating in every repetition so all see the same machine load; medians.

* ``as built``: the flags every build uses (``--log-level none``, ``--log-level-file
  warn``, dbt's JSON artifacts written);
* ``--no-write-json``: without ``run_results.json`` and ``manifest.json``;
* ``--log-level-file none``: nothing into ``dbt.log``;
* ``--no-populate-cache``: dbt does not list the schemas' relations up front.

Writes the part ``dbt-flags`` of ``docs/benchmarks-history.md`` (raw figures:
``benchmarks/.work/dbt_flags.json``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from diligence.analytics.dbt import invoke, location_of, prepare

from .dbt_cost import _raw_large
from .harness import ROOT, WORK_DIR, machine
from .results_file import write_part

HISTORY = ROOT / "docs" / "benchmarks-history.md"
BUILD = ["build", "--exclude-resource-type", "unit_test"]
VARIANTS = {
    "as built": [],
    "--no-write-json": ["--no-write-json"],
    "--log-level-file none": ["--log-level-file", "none"],
    "--no-populate-cache": ["--no-populate-cache"],
}


def _build(warehouse: Path, flags: list[str]) -> float:
    with tempfile.TemporaryDirectory(prefix="dbt-flags-") as target:
        started = time.perf_counter()
        run = invoke(BUILD + flags, location_of(warehouse), target="build", target_path=Path(target),
                     variables={"as_of": "2026-03-01 00:00:00", "expiring_within_days": 30})
        seconds = time.perf_counter() - started
    if not run.success:
        raise SystemExit(f"build with {flags or 'the usual flags'} failed: {run.error or run.first_failure()}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.dbt_flags",
                                     description=__doc__.split("\n\n")[1])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    prepare("build")
    with tempfile.TemporaryDirectory(prefix="dbt-flags-") as work:
        warehouse = _raw_large(Path(work))
        _build(warehouse, [])  # the first build creates the tables the others replace
        seconds: dict[str, list[float]] = {name: [] for name in VARIANTS}
        for repetition in range(args.repeat):
            for name, flags in VARIANTS.items():
                seconds[name].append(_build(warehouse, flags))
                print(f"{repetition + 1}: {name} {seconds[name][-1]:.2f} s", flush=True)
    (WORK_DIR / "dbt_flags.json").write_text(json.dumps(seconds, indent=2))
    base = statistics.median(seconds["as built"])
    m = machine()
    lines = [
        "## dbt flags for the build (`python -m benchmarks.dbt_flags`)",
        "",
        f"{m.date}, {m.cores} cores, load average {m.load_average}; the `large` synthetic raw "
        f"layer, the build's `dbt build` in one warmed process, variants alternating, "
        f"{args.repeat} repetitions, medians.",
        "",
        "| flags | seconds (median) | of the build as it runs | runs |",
        "|---|---:|---:|---|",
    ]
    for name, values in seconds.items():
        median = statistics.median(values)
        lines.append(f"| {name} | {median:.2f} | {median / base:.3f} | "
                     + ", ".join(f"{v:.2f}" for v in values) + " |")
    text = "\n".join(lines)
    print(text)
    write_part(HISTORY, "dbt-flags", text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
