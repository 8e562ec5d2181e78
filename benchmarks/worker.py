"""Child process entry point: ``python -m benchmarks.worker JOB.json RESULT.json [PROFILE]``.

Runs one job (``sync``, ``ceiling``, ``naive`` or ``rest_api``) and writes its
result as JSON. The parent (:func:`benchmarks.harness.run_child`) reads the
child's peak memory from ``os.wait4``. The job's modules are imported before it
starts (``PRELOAD``), so no contender's timings include loading its libraries, and
a profile is not diluted by it. With a third argument the job runs under
pyinstrument and the session is saved there.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path
from typing import Any

#: Imported before a job of each kind starts (its timings exclude them).
PRELOAD = {
    "sync": ["diligence.sync", "diligence.warehouse", "diligence.steps", "diligence.analytics",
             "diligence.analytics.models", "diligence.report.export",
             "pipelines.company_connections", "dlt", "dlt.destinations", "duckdb", "pyarrow",
             "pyarrow.parquet", "benchmarks.ours"],
    "ceiling": ["httpx", "benchmarks.ceiling"],
    "naive": ["httpx", "dlt", "dlt.destinations", "duckdb", "benchmarks.baseline_naive"],
    "rest_api": ["dlt", "dlt.destinations", "dlt.sources.rest_api", "dlt.sources.helpers.requests",
                 "duckdb", "benchmarks.baseline_rest_api"],
}


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Dispatch `job` on its ``kind``."""
    kind = job["kind"]
    if kind == "sync":
        from . import ours

        return ours.run(job)
    if kind == "ceiling":
        from . import ceiling

        return ceiling.run(job)
    if kind == "naive":
        from . import baseline_naive

        return baseline_naive.run(job)
    if kind == "rest_api":
        from . import baseline_rest_api

        return baseline_rest_api.run(job)
    raise ValueError(f"unknown job kind {kind!r}")


def run_profiled(job: dict[str, Any], session_path: Path) -> dict[str, Any]:
    """Run `job` under pyinstrument (main thread, 1 ms samples); save the session."""
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.001, async_mode="disabled")
    profiler.start()
    try:
        return run_job(job)
    finally:
        session = profiler.stop()
        session.save(str(session_path))


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    job_path, result_path = Path(args[0]), Path(args[1])
    job = json.loads(job_path.read_text())
    for module in PRELOAD.get(job["kind"], []):
        importlib.import_module(module)
    result = run_profiled(job, Path(args[2])) if len(args) > 2 else run_job(job)
    result_path.write_text(json.dumps(result, default=str))


if __name__ == "__main__":
    main()
