"""Our sync as users run it: :func:`diligence.sync.run_sync`, then the analytics and
export steps that ``diligence sync`` runs after it (:mod:`diligence.steps`: the models
under their DuckDB memory bound, the checks, the analysts' copy; the reports).

`run_sync` times the fetch (``extract``: until the last namespace is complete; the
others are loaded meanwhile) and what follows it (``load``: the last namespace's dlt
run); the split of the latter into dlt's extract, normalize and load steps comes from
the pipeline's trace (``pipeline.last_trace``), written by the same run.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Self

from . import counts
from .harness import EMAIL, PASSWORD

#: Relations of our raw layer compared with the other contenders.
RELATIONS = {
    "connections": "raw.connections",
    "questionnaires": "raw.questionnaires where _dlt_valid_to is null",
    "documents": "raw.documents where _dlt_valid_to is null",
}


class RssSampler:
    """Samples this process's resident memory and CPU time every `interval` seconds."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        # (perf_counter, rss MB, process CPU s, wall clock)
        self.samples: list[tuple[float, float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._page_mb = os.sysconf("SC_PAGE_SIZE") / 1024 / 1024

    def _rss(self) -> float:
        try:
            with open("/proc/self/statm") as fh:
                return int(fh.read().split()[1]) * self._page_mb
        except (OSError, ValueError, IndexError):
            return float("nan")

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter(), self._rss(), time.process_time(),
                                 time.time()))
            self._stop.wait(self.interval)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def peak(self, start: float, end: float) -> float:
        """Highest sample taken between perf_counter times `start` and `end`."""
        values = [rss for t, rss, _, _ in self.samples if start <= t <= end]
        return max(values) if values else float("nan")

    def peak_wall(self, start: float, end: float) -> float:
        """Highest sample taken between wall-clock times `start` and `end`."""
        values = [rss for _, rss, _, w in self.samples if start <= w <= end]
        return max(values) if values else float("nan")

    def cpu_at(self, when: float) -> float:
        """Process CPU seconds at the sample nearest to perf_counter time `when`."""
        if not self.samples:
            return float("nan")
        return min(self.samples, key=lambda sample: abs(sample[0] - when))[2]


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Job ``sync``: keys base_url, warehouse, and optional namespaces, max_concurrency,
    models (bool), export (bool)."""
    from diligence.steps import analytics_step, export_step
    from diligence.sync import run_sync, source_settings
    from diligence.warehouse import Warehouse, pipeline_for

    warehouse = Path(job["warehouse"])
    options: dict[str, Any] = {"email": EMAIL, "password": PASSWORD, "token_store_path": None}
    if job.get("max_concurrency"):
        options["max_concurrency"] = job["max_concurrency"]
    sampler = RssSampler().__enter__()
    marks = {"start": time.perf_counter()}
    started = marks["start"]
    cpu_started = time.process_time()
    result = run_sync(warehouse, source_settings(base_url=job["base_url"], namespaces=job.get("namespaces"),
                                                 **options))
    total = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    marks["synced"] = started + total
    timings = {
        "fetch": result.timings.get("extract", float("nan")),
        "dlt_run": result.timings.get("load", float("nan")),
        "sync": total,
        "cpu_sync": cpu,  # CPU seconds of every thread of this process during the sync
    }
    trace = pipeline_for(warehouse).last_trace
    dlt_windows: dict[str, tuple[float, float]] = {}
    for step in trace.steps if trace else []:
        if step.step in ("extract", "normalize", "load") and step.started_at and step.finished_at:
            timings[f"dlt_{step.step}"] = (step.finished_at - step.started_at).total_seconds()
            dlt_windows[f"dlt {step.step}"] = (step.started_at.timestamp(),
                                               step.finished_at.timestamp())
    out: dict[str, Any] = {
        "timings": timings,
        "requests": result.requests + 1,  # + user-info, which is not per namespace
        "rows": result.rows,
        "failed": [f"{o.namespace_company_id}: {o.error}" for o in result.failed],
        "counts": counts.per_namespace(warehouse, RELATIONS),
        "errors": {},
    }
    owner = Warehouse(warehouse)
    if job.get("models"):
        try:
            t0 = time.perf_counter()
            analytics = analytics_step(owner)
            marks["models"] = time.perf_counter()
            models = analytics.models
            timings["models"] = models.seconds
            timings["checks"] = marks["models"] - t0 - models.seconds
            out["model_rows"] = dict(models.row_counts)
            if analytics.failed_checks:  # a benchmark of wrong data is no benchmark
                out["errors"]["checks"] = "data checks failed: " + ", ".join(
                    f"{c.name} ({c.failing_rows} rows)" for c in analytics.failed_checks)
            slowest = sorted(models.timings.items(), key=lambda kv: -kv[1])[:3]
            out["slowest_models"] = [[name, seconds] for name, seconds in slowest]
        except Exception as exc:  # noqa: BLE001 - reported in the table, not fatal
            out["errors"]["models"] = f"{type(exc).__name__}: {exc}"[:300]
    if job.get("export") and "models" in timings:
        try:
            for fmt in ("parquet", "csv"):
                t0 = time.perf_counter()
                export_step(owner, warehouse.parent / f"reports-{fmt}", [fmt])
                timings[f"export_{fmt}"] = time.perf_counter() - t0
            marks["exported"] = time.perf_counter()
        except Exception as exc:  # noqa: BLE001
            out["errors"]["export"] = f"{type(exc).__name__}: {exc}"[:300]
    sampler.__exit__(None, None, None)
    # phase windows: the fetch ends where dlt's run begins (run_sync times both)
    fetch_end = started + total - timings["dlt_run"]
    phases = {"fetch (earlier namespaces loaded meanwhile)": sampler.peak(started, fetch_end)}
    if dlt_windows:
        phases.update({name: sampler.peak_wall(a, b) for name, (a, b) in dlt_windows.items()})
    else:
        phases["dlt run"] = sampler.peak(fetch_end, marks["synced"])
    if "models" in marks:
        phases["models, checks, analysts' copy"] = sampler.peak(marks["synced"], marks["models"])
    if "exported" in marks:
        phases["exports"] = sampler.peak(marks["models"], marks["exported"])
    out["rss_phases"] = phases
    timings["cpu_fetch"] = sampler.cpu_at(fetch_end) - sampler.cpu_at(started)
    return out
