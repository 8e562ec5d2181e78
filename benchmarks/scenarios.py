"""The five scenarios. Each starts its own sandbox process, runs every contender in
child processes, and returns a :class:`~benchmarks.report.Section`.

Figures are medians over `Config.repeat` runs; ratios pair runs of the same
repetition (contenders run one after the other inside a repetition, on the same
sandbox), and the ratio reported is the median of those per-repetition ratios.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import counts, profiling
from .harness import ChildResult, Sandbox, median, run_child, sandbox
from .report import Goal, Section, Table, num, pct


@dataclass(frozen=True)
class Sizes:
    """Which sandbox profiles (and how many runs of the slow parts) a mode uses."""

    latency: str
    throughput: str
    throughput_runs: int  # cap on repetitions of the throughput scenario
    rate: str
    rate_namespaces: int | None  # first N namespaces only (None: all)
    rate_cap: float
    baselines: str
    baseline_latency_ms: float
    naive_runs: int
    rest_api_default_runs: int  # extra runs of rest_api with dlt's default 5 workers
    scaling: tuple[str, ...]
    profile_scale: str  # sandbox profile of the no-latency profiling runs


MODES: dict[str, Sizes] = {
    "full": Sizes(latency="medium", throughput="large", throughput_runs=1, rate="medium",
                  rate_namespaces=1, rate_cap=50, baselines="medium", baseline_latency_ms=50,
                  naive_runs=1, rest_api_default_runs=1, scaling=("small", "medium", "large"),
                  profile_scale="medium"),
    "quick": Sizes(latency="small", throughput="medium", throughput_runs=1, rate="small",
                   rate_namespaces=None, rate_cap=50, baselines="small", baseline_latency_ms=50,
                   naive_runs=1, rest_api_default_runs=0, scaling=("small", "medium"),
                   profile_scale="small"),
    "tiny": Sizes(latency="small", throughput="small", throughput_runs=1, rate="small",
                  rate_namespaces=1, rate_cap=100, baselines="small", baseline_latency_ms=10,
                  naive_runs=1, rest_api_default_runs=0, scaling=("small",), profile_scale="small"),
}


@dataclass
class Config:
    """How the scenarios run."""

    work: Path
    mode: str = "full"
    repeat: int = 3
    throughput_repeat: int | None = None  # None: min(repeat, the mode's throughput_runs)
    profile: bool = True
    concurrency: int = 16
    latency_ms: float = 50.0
    timeout: float = 900.0
    cache: dict[str, Any] = field(default_factory=dict)

    @property
    def sizes(self) -> Sizes:
        return MODES[self.mode]

    @property
    def throughput_runs(self) -> int:
        if self.throughput_repeat is not None:
            return self.throughput_repeat
        return min(self.repeat, self.sizes.throughput_runs)

    @property
    def logs(self) -> Path:
        return self.work / "logs"

    def warehouse(self, scenario: str, name: str) -> Path:
        return self.work / "warehouses" / scenario / name / "warehouse.duckdb"

    def fresh(self, scenario: str) -> None:
        shutil.rmtree(self.work / "warehouses" / scenario, ignore_errors=True)


# -- jobs ---------------------------------------------------------------------------------

@dataclass
class Run:
    """One child run with the sandbox's view of it."""

    child: ChildResult
    stats: dict[str, Any]
    sandbox_cpu: float

    @property
    def result(self) -> dict[str, Any]:
        return self.child.result

    @property
    def timings(self) -> dict[str, float]:
        return self.child.result.get("timings", {})

    @property
    def served(self) -> int:
        return int(self.stats["total"])


def _job(cfg: Config, sb: Sandbox, kind: str, scenario: str, name: str, **extra: Any) -> Run:
    """Run one job in a child against `sb`, with the sandbox's counters of that run."""
    sb.reset_stats()
    job = {"kind": kind, "label": f"{scenario}-{name}", "base_url": sb.base_url,
           "warehouse": str(cfg.warehouse(scenario, name)), "max_concurrency": cfg.concurrency,
           "concurrency": cfg.concurrency, "workers": cfg.concurrency, **extra}
    before = sb.cpu_seconds() or 0.0
    child = run_child(job, timeout=cfg.timeout, log_dir=cfg.logs)
    after = sb.cpu_seconds() or 0.0
    return Run(child, sb.stats(), after - before)


def _profile(cfg: Config, title: str, job: dict[str, Any], scale: str,
             sandbox_args: dict[str, Any] | None = None) -> str:
    """Run `job` once under pyinstrument on a fresh `scale` sandbox; Markdown summary."""
    name = f"{job['kind']}-{job.get('label', 'job')}"
    path = cfg.work / "profiles" / f"{name}.pyisession"
    path.parent.mkdir(parents=True, exist_ok=True)
    with sandbox(scale, log_dir=cfg.logs, **(sandbox_args or {})) as sb:
        job = {**job, "base_url": sb.base_url, "concurrency": cfg.concurrency,
               "max_concurrency": cfg.concurrency, "workers": cfg.concurrency}
        if "warehouse" in job:
            shutil.rmtree(Path(job["warehouse"]).parent, ignore_errors=True)
        child = run_child(job, timeout=cfg.timeout * 3, log_dir=cfg.logs, profile_to=path)
    summary = profiling.summarize(path)
    timings = ", ".join(f"{k} {v:.2f} s" for k, v in child.result.get("timings", {}).items())
    where = f"`{scale}` sandbox" + (", " + ", ".join(f"{k}={v}" for k, v in sandbox_args.items())
                                    if sandbox_args else "")
    text = profiling.render(summary, f"{title} ({where})")
    try:
        shown = path.relative_to(Path.cwd())
    except ValueError:
        shown = path
    return (f"{text}\n\nPhase timings of the profiled run (slowed by the profiler): {timings}. "
            f"Open it: `.venv/bin/pyinstrument --load {shown}`.")


# -- 1. latency-bound ---------------------------------------------------------------------

def latency_bound(cfg: Config) -> Section:
    scale, latency = cfg.sizes.latency, cfg.latency_ms
    cfg.fresh("latency")
    runs: list[dict[str, Any]] = []
    with sandbox(scale, latency_ms=latency, log_dir=cfg.logs) as sb:
        truth = sb.truth()
        for r in range(cfg.repeat):
            run = _job(cfg, sb, "sync", "latency", f"run{r}")
            t = run.timings
            ideal = run.served * latency / 1000 / cfg.concurrency
            runs.append({"requests": run.served, "ideal": ideal, "fetch": t["fetch"],
                         "dlt": t["dlt_run"], "wall": t["sync"], "util": ideal / t["sync"],
                         "util_fetch": ideal / t["fetch"], "cpu_fetch": t.get("cpu_fetch"),
                         "cpu_share": t.get("cpu_fetch", float("nan")) / t["fetch"],
                         "cpu_ms": 1000 * t.get("cpu_fetch", float("nan")) / run.served,
                         "sandbox_cpu": run.sandbox_cpu, "failed": run.result["failed"]})
    keys = ("requests", "ideal", "fetch", "dlt", "wall", "util", "util_fetch", "cpu_share",
            "cpu_ms", "sandbox_cpu")
    med = {k: median([run[k] for run in runs]) for k in keys}
    cfg.cache["latency"] = med
    table = Table(["run", "requests served", "ideal s", "fetch s", "dlt s", "sync wall s",
                   "utilisation (sync)", "utilisation (fetch only)",
                   "client CPU busy during fetch", "client CPU ms / request", "sandbox CPU s"])
    rows = [(str(i + 1), run) for i, run in enumerate(runs)] + [("**median**", med)]
    for label, run in rows:
        table.rows.append([label, int(run["requests"]), run["ideal"], run["fetch"], run["dlt"],
                           run["wall"], pct(run["util"]), pct(run["util_fetch"]),
                           pct(run["cpu_share"]), run["cpu_ms"], run["sandbox_cpu"]])
    met = med["util"] >= 0.85
    section = Section(
        "latency", "1. Latency-bound",
        f"Sandbox `{scale}` with {latency:g} ms latency on every request; our sync "
        f"(`run_sync`, max_concurrency {cfg.concurrency}) into a fresh DuckDB file per run. "
        f"Ideal = requests served (sandbox `/_sandbox/stats`, login included) x latency / "
        f"max_concurrency; utilisation = ideal / wall. Ground truth: "
        f"{truth['expected_requests']:,} requests per sync (login excluded). Client CPU: "
        f"CPU seconds of the sync's process (all threads) during the fetch, sampled every "
        f"50 ms, over the fetch's wall time (100 % = one core busy).",
        tables=[table],
        goals=[Goal("utilisation of the sync (fetch + dlt load)", ">= 85 %", pct(med["util"]), met)],
        raw={"runs": runs})
    needed = cfg.concurrency / (latency / 1000)
    bound = med["ideal"] / (med["ideal"] + med["wall"] - med["fetch"])
    section.notes.append(
        f"The fetch alone reaches {pct(med['util_fetch'])} of the ideal. Each namespace is "
        f"loaded as soon as its fetch is complete, while the others are still read, so what "
        f"follows the fetch is the last namespace's dlt run ({num(med['dlt'])} s); with the "
        f"set-up before the first request, {num(med['wall'] - med['fetch'])} s of the wall "
        f"time has nothing in flight. A perfect fetch (exactly the ideal) with the same "
        f"{num(med['wall'] - med['fetch'])} s would score {pct(bound)}. To keep {cfg.concurrency} "
        f"requests in flight at {latency:g} ms the client must complete {needed:,.0f} "
        f"requests/s, i.e. spend under {1000 / needed:.1f} ms of CPU per request; it spends "
        f"{num(med['cpu_ms'])} ms and its CPU is {pct(med['cpu_share'])} busy during the "
        f"fetch (the sandbox used {num(med['sandbox_cpu'])} s of CPU per run)"
        + (", so on this machine the fan-out is bounded by the client's CPU, not by the "
           "concurrency limit." if med["cpu_share"] >= 0.8 else "."))
    if not met and cfg.profile:
        profile = _profile(
            cfg, "Our sync, latency-bound",
            {"kind": "sync", "label": "latency-profile",
             "warehouse": str(cfg.warehouse("profiles", "latency"))},
            scale, {"latency_ms": latency})
        cfg.cache["latency_profile"] = profile
        section.profiles.append(profile)
    return section


# -- 2. throughput-bound ------------------------------------------------------------------

PHASES = [("fetch", "fetch (HTTP fan-out, parse, rows)"), ("dlt_extract", "dlt extract"),
          ("dlt_normalize", "dlt normalize"), ("dlt_load", "dlt load"),
          ("models", "models (`build_models`)"), ("checks", "checks and the analysts' copy"),
          ("export_parquet", "export parquet"),
          ("export_csv", "export csv")]


def throughput_bound(cfg: Config) -> Section:
    scale = cfg.sizes.throughput
    cfg.fresh("throughput")
    ours_runs: list[dict[str, Any]] = []
    ceiling_runs: list[dict[str, Any]] = []
    errors: dict[str, str] = {}
    slowest: list[Any] = []
    with sandbox(scale, log_dir=cfg.logs) as sb:
        truth = sb.truth()
        for r in range(cfg.throughput_runs):
            order = ("ceiling", "ours") if r % 2 == 0 else ("ours", "ceiling")
            for who in order:
                if who == "ceiling":
                    run = _job(cfg, sb, "ceiling", "throughput", f"ceiling{r}")
                    ceiling_runs.append({**run.timings, "requests": run.served,
                                         "statuses": run.result["statuses"],
                                         "peak": run.child.peak_rss_mb,
                                         "sandbox_cpu": run.sandbox_cpu})
                else:
                    run = _job(cfg, sb, "sync", "throughput", f"run{r}", models=True, export=True)
                    res = run.result
                    errors.update(res.get("errors", {}))
                    slowest = res.get("slowest_models", slowest)
                    ours_runs.append({**run.timings, "requests": run.served, "rows": res["rows"],
                                      "peak": run.child.peak_rss_mb,
                                      "rss_phases": res.get("rss_phases", {}),
                                      "sandbox_cpu": run.sandbox_cpu, "failed": res["failed"]})
    for o, c in zip(ours_runs, ceiling_runs, strict=True):
        o["ratio"] = c["fetch"] / o["sync"]
        o["ratio_fetch"] = c["fetch"] / o["fetch"]
        o["rps"] = o["requests"] / o["sync"]
        o["rows_s"] = o["rows"] / o["sync"]
        o["rps_fetch"] = o["requests"] / o["fetch"]
        o["cpu_ms"] = 1000 * o.get("cpu_fetch", float("nan")) / o["requests"]
        o["sandbox_ms"] = 1000 * o["sandbox_cpu"] / o["requests"]
        c["rps"] = c["requests"] / c["fetch"]
        c["cpu_ms"] = 1000 * c.get("cpu_fetch", float("nan")) / c["requests"]
        c["sandbox_ms"] = 1000 * c["sandbox_cpu"] / c["requests"]
    cfg.cache["throughput"] = ours_runs

    def m(key: str, runs: list[dict[str, Any]] = ours_runs) -> float:
        return median([run.get(key, float("nan")) for run in runs])

    def join(key: str, runs: list[dict[str, Any]], fmt: Callable[[float], str]) -> str:
        return " / ".join(fmt(run.get(key, float("nan"))) for run in runs) if len(runs) > 1 else ""

    def int0(v: object) -> object:
        return num(v, 0)

    main = Table(["metric", "ours", "ceiling (bare fetch)", "runs (ours)"],
                 title="End to end (sync = fetch + dlt extract/normalize/load)")
    main.rows += [
        ["requests per sync (served, login included)", num(int(m("requests"))),
         num(int(m("requests", ceiling_runs))), ""],
        ["rows landed (SyncResult.rows)", num(int(m("rows"))), "—", ""],
        ["wall s", num(m("sync")), num(m("fetch", ceiling_runs)), join("sync", ours_runs, num)],
        ["requests/s end to end", int0(m("rps")), int0(m("rps", ceiling_runs)),
         join("rps", ours_runs, int0)],
        ["rows/s end to end", int0(m("rows_s")), "—", join("rows_s", ours_runs, int0)],
        ["requests/s of the fetch phase alone", int0(m("rps_fetch")), int0(m("rps", ceiling_runs)),
         join("rps_fetch", ours_runs, int0)],
        ["**ratio to the ceiling, end to end**", num(m("ratio")), "1", join("ratio", ours_runs, num)],
        ["ratio to the ceiling, fetch phase only", num(m("ratio_fetch")), "1",
         join("ratio_fetch", ours_runs, num)],
        ["client CPU ms per request during the fetch", num(m("cpu_ms")), num(m("cpu_ms", ceiling_runs)),
         join("cpu_ms", ours_runs, num)],
        ["sandbox CPU ms per request", num(m("sandbox_ms"), 3), num(m("sandbox_ms", ceiling_runs), 3), ""],
        ["peak RSS MB (one process: sync, then models and checks, then exports)", int0(m("peak")),
         int0(m("peak", ceiling_runs)), join("peak", ours_runs, int0)],
    ]
    phases = Table(["phase", "median s", "share"], title="Time per phase (ours)")
    present = [(k, label) for k, label in PHASES if k in ours_runs[0]]
    overhead = m("sync") - m("fetch") - m("dlt_extract") - m("dlt_normalize") - m("dlt_load")
    total = sum(m(k) for k, _ in present) + overhead
    for key, label in present:
        phases.rows.append([label, num(m(key)), pct(m(key) / total)])
    phases.rows.append(["other (pipeline set-up, lock, trace)", num(overhead), pct(overhead / total)])
    tables = [main, phases]
    rss = ours_runs[0].get("rss_phases") or {}
    if rss:
        tables.append(Table(["phase", "peak RSS MB"], [[k, int0(v)] for k, v in rss.items()],
                            title="Memory by phase (sampled every 50 ms, first run)"))
    if slowest:
        tables.append(Table(["model", "s (last run)"], [[n, num(s)] for n, s in slowest],
                            title="Slowest models"))
    ratio, peak, models_s = m("ratio"), m("peak"), m("models")
    goals = [
        Goal("throughput vs bare-fetch ceiling (end to end)", ">= 0.7", num(ratio), ratio >= 0.7),
        Goal("peak memory", "< 1 GB (1,024 MB)", f"{int0(peak)} MB", peak < 1024),
        Goal("models build time", "< 5 s", errors.get("models", "—") if math.isnan(models_s)
             else f"{num(models_s)} s", None if math.isnan(models_s) else models_s < 5),
    ]
    runs_text = (f"{cfg.throughput_runs} repetitions" if cfg.throughput_runs > 1 else
                 "one repetition" + (" (a sync of this profile takes minutes on this machine; "
                                     "pass `--throughput-repeat 3` for medians of three)"
                                     if scale == "large" else ""))
    section = Section(
        "throughput", "2. Throughput-bound",
        f"Sandbox `{scale}` with no latency; {runs_text}. Each repetition runs the ceiling and "
        f"our sync one after the other on the same sandbox (alternating which goes first). "
        f"Ours: `run_sync` (max_concurrency {cfg.concurrency}) into a fresh DuckDB file, then "
        f"the steps `diligence sync` runs after it, in the same child process: the models "
        f"(under their DuckDB memory bound), the checks and the analysts' copy, then the "
        f"exports (parquet, then csv); "
        f"dlt's step timings come from the pipeline trace. Ceiling: the same "
        f"{truth['expected_requests']:,} GETs plus the login, same concurrency, one pooled "
        f"`httpx.AsyncClient` (same pool limits as ours), bodies read and dropped, every URL "
        f"known in advance (a sync has to wait for parents before it knows its children).",
        tables=tables, goals=goals, raw={"ours": ours_runs, "ceiling": ceiling_runs})
    for name, error in errors.items():
        section.notes.append(f"`{name}`: {error}")
    section.notes.append(
        f"The ceiling itself is CPU-bound in the client: {num(m('cpu_ms', ceiling_runs))} ms of "
        f"client CPU per request against {num(m('sandbox_ms', ceiling_runs), 3)} ms in the "
        "sandbox, so both figures measure how much Python work each request costs on this "
        "machine.")
    if cfg.profile and not all(g.met for g in goals[:2]):
        pscale = cfg.sizes.profile_scale
        section.notes.append(
            f"Profiles below are of the `{pscale}` profile (a profiled `{scale}` run would take "
            "several minutes); the cost per request is the same at every size.")
        section.profiles.append(_profile(
            cfg, "Ceiling (bare httpx fetch)", {"kind": "ceiling", "label": "throughput-profile"},
            pscale))
        section.profiles.append(_profile(
            cfg, "Our sync", {"kind": "sync", "label": "throughput-profile",
                              "warehouse": str(cfg.warehouse("profiles", "throughput"))}, pscale))
    return section


# -- 3. rate-limited ----------------------------------------------------------------------

def rate_limited(cfg: Config) -> Section:
    sizes = cfg.sizes
    scale, cap = sizes.rate, sizes.rate_cap
    burst = max(1.0, cap)  # the sandbox's default bucket size
    cfg.fresh("rate")
    runs: list[dict[str, Any]] = []
    with sandbox(scale, rate_limit=cap, log_dir=cfg.logs) as sb:
        truth = sb.truth()
        namespaces = truth["namespaces"][: sizes.rate_namespaces] if sizes.rate_namespaces else None
        for r in range(cfg.repeat):
            run = _job(cfg, sb, "sync", "rate", f"run{r}", namespaces=namespaces)
            res = run.result
            throttled = run.stats.get("injected", {}).get("rate_limited", 0)
            accepted = run.served - throttled
            fetch = res["timings"]["fetch"]
            net = max(0.0, accepted - burst) / fetch
            runs.append({"accepted": accepted, "throttled": throttled, "fetch": fetch,
                         "rate": accepted / fetch, "net": net, "share": net / cap,
                         "failed": len(res["failed"]), "failed_detail": res["failed"]})
    table = Table(["run", "requests accepted", "429s (sandbox)", "fetch s", "accepted / s",
                   "sustained req/s (net of the initial burst)", "% of cap", "failed namespaces"])
    keys = ("accepted", "throttled", "fetch", "rate", "net", "share", "failed")
    med = {k: median([run[k] for run in runs]) for k in keys}
    for label, run in [(str(i + 1), run) for i, run in enumerate(runs)] + [("**median**", med)]:
        table.rows.append([label, int(run["accepted"]), int(run["throttled"]), run["fetch"],
                           run["rate"], run["net"], pct(run["share"], 1), int(run["failed"])])
    which = ("the first namespace" if sizes.rate_namespaces == 1 else
             f"the first {sizes.rate_namespaces} namespaces" if sizes.rate_namespaces else
             "every namespace")
    long_enough = med["fetch"] >= 10
    section = Section(
        "rate", "3. Rate-limited",
        f"Sandbox `{scale}` capped at {cap:g} requests/s (token bucket of {burst:g}, starting "
        f"full; beyond it 429 with Retry-After), our sync of {which} with default settings: "
        f"no `requests_per_second`, the client "
        f"has to find the limit from the 429s. Sustained rate = (requests the sandbox accepted "
        f"- the bucket's initial {burst:g}) / fetch seconds, so a perfect client scores 100 %.",
        tables=[table],
        goals=[Goal("sustained rate", f">= 90 % of {cap:g}/s", pct(med["share"], 1),
                    med["share"] >= 0.9 if long_enough else None),
               Goal("failed requests", "0",
                    f"{int(max(run['failed'] for run in runs))} failed namespaces",
                    all(run["failed"] == 0 for run in runs)),
               Goal("run length", ">= 10 s", f"{num(med['fetch'])} s",
                    True if long_enough else None)],
        raw={"runs": runs})
    section.notes.append(
        "A request that still fails after its retries fails its whole namespace (nothing of it "
        "is loaded), so 0 failed namespaces means every request eventually succeeded. 429s "
        "are the sandbox's count of rejected attempts; each was retried.")
    if not long_enough:
        section.notes.append("This run was shorter than 10 s (tiny/quick profile), so the rate "
                             "goal is not judged.")
    if cfg.profile and long_enough and med["share"] < 0.9:
        section.profiles.append(_profile(
            cfg, "Our sync, rate-limited",
            {"kind": "sync", "label": "rate-profile", "namespaces": namespaces,
             "warehouse": str(cfg.warehouse("profiles", "rate"))}, scale, {"rate_limit": cap}))
    return section


# -- 4. baselines -------------------------------------------------------------------------

LABELS = {"ours": "ours (`run_sync`)", "rest_api": "(b) dlt `rest_api`, 16 workers",
          "rest_api_default": "(b') dlt `rest_api`, dlt's default 5 workers",
          "naive": "(a) naive sequential script"}


def baselines(cfg: Config) -> Section:
    sizes = cfg.sizes
    scale, latency = sizes.baselines, sizes.baseline_latency_ms
    cfg.fresh("baselines")
    results: dict[str, list[dict[str, Any]]] = {k: [] for k in LABELS}
    with sandbox(scale, latency_ms=latency, log_dir=cfg.logs) as sb:
        truth = sb.truth()
        for r in range(cfg.repeat):
            results["ours"].append(_entry(_job(cfg, sb, "sync", "baselines", f"ours{r}")))
            results["rest_api"].append(_entry(_job(cfg, sb, "rest_api", "baselines", f"rest_api{r}")))
            if r < sizes.rest_api_default_runs:
                results["rest_api_default"].append(_entry(_job(
                    cfg, sb, "rest_api", "baselines", f"rest_api_default{r}", workers=5)))
            if r < sizes.naive_runs:
                results["naive"].append(_entry(_job(cfg, sb, "naive", "baselines", f"naive{r}")))
    results = {k: v for k, v in results.items() if v}
    expected = counts.truth_counts(truth)
    ours_med = median([e["sync"] for e in results["ours"]])
    # side-by-side: each baseline run against our run of the same repetition
    speedups = {name: [e["sync"] / results["ours"][i]["sync"] for i, e in enumerate(entries)]
                for name, entries in results.items() if name != "ours"}
    perf = Table(["contender", "runs", "wall s (median)", "each run s", "requests served",
                  "peak RSS MB", "speedup of ours (same repetition)"])
    for name, entries in results.items():
        speedup = "—"
        if name != "ours":
            speedup = f"{num(median(speedups[name]), 1)}x"
            if len(entries) < len(results["ours"]):
                speedup += (f" (vs the median of ours: "
                            f"{num(median([e['sync'] for e in entries]) / ours_med, 1)}x)")
        perf.rows.append([LABELS[name], len(entries), median([e["sync"] for e in entries]),
                          " / ".join(num(e["sync"], 1) for e in entries),
                          int(median([e["requests"] for e in entries])),
                          num(median([e["peak"] for e in entries]), 0), speedup])
    phases = Table(["contender", "fetch s", "dlt extract s", "dlt normalize s", "dlt load s",
                    "tables created"],
                   title="Where the time goes (medians; rest_api fetches inside dlt's extract)")
    for name, entries in results.items():
        def med(key: str, entries: list[dict[str, Any]] = entries) -> float:
            return median([e["timings"].get(key, float("nan")) for e in entries])

        phases.rows.append([LABELS[name], med("fetch"), med("dlt_extract"), med("dlt_normalize"),
                            med("dlt_load"), entries[0].get("tables") or "9 (`raw`)"])
    rows = Table(["contender", "connections", "questionnaires", "documents",
                  "differences vs ground truth", "differences vs ours"],
                 title="Same rows? Counts per namespace compared (last run of each contender)")
    ours_counts = results["ours"][-1]["counts"]
    t = counts.totals(expected)
    rows.rows.append(["sandbox ground truth", t["connections"], t["questionnaires"],
                      t["documents"], "—", "—"])
    all_match = True
    for name, entries in results.items():
        found = entries[-1]["counts"]
        t = counts.totals(found)
        vs_truth = counts.differences(found, expected)
        vs_ours = counts.differences(found, ours_counts) if name != "ours" else []
        all_match &= not vs_truth and not vs_ours
        rows.rows.append([LABELS[name], t["connections"], t["questionnaires"], t["documents"],
                          "; ".join(vs_truth) or "none",
                          "—" if name == "ours" else "; ".join(vs_ours) or "none"])
    naive_x = median(speedups.get("naive", []))
    rest_x = median(speedups.get("rest_api", []))
    rest_default_x = median(speedups.get("rest_api_default", []))
    # no client with `concurrency` requests in flight beats requests x latency / concurrency
    ideal = median([e["requests"] for e in results["ours"]]) * latency / 1000 / cfg.concurrency
    rest_bound = median([e["sync"] for e in results["rest_api"]]) / ideal if ideal else float("nan")
    section = Section(
        "baselines", "4. Baselines side by side",
        f"Sandbox `{scale}` with {latency:g} ms latency. In each of {cfg.repeat} repetition(s): "
        f"ours, then dlt's `rest_api` source with {cfg.concurrency} workers, then (first "
        f"repetition only) "
        + ("`rest_api` with dlt's default workers and " if sizes.rest_api_default_runs else "")
        + f"the naive script, all on the same sandbox, each in its own process and into its own "
        f"fresh DuckDB file. The contenders marked first-repetition-only run once, to bound "
        f"the benchmark's time (the naive script takes minutes at {latency:g} ms per "
        f"request); their speedups pair them with our run of the same repetition. Requests "
        f"served are counted by the sandbox (login included); wall time covers login to the "
        f"last row loaded for every contender.",
        tables=[perf, phases, rows],
        goals=[Goal("speedup over (a) naive", ">= 10x", f"{num(naive_x, 1)}x",
                    None if math.isnan(naive_x) else naive_x >= 10),
               Goal("speedup over (b) rest_api, same concurrency (16 workers)", ">= 3x",
                    f"{num(rest_x, 1)}x", None if math.isnan(rest_x) else rest_x >= 3),
               *([Goal("speedup over (b') rest_api as documented (default 5 workers)", ">= 3x",
                       f"{num(rest_default_x, 1)}x", rest_default_x >= 3)]
                 if not math.isnan(rest_default_x) else []),
               Goal("same rows land (connections, questionnaires, documents per namespace)",
                    "no difference", "none" if all_match else "differences, see table", all_match)],
        raw=results)
    section.notes += [
        ("(a) `benchmarks/baseline_naive.py`: one `httpx.Client`, one request at a time, the same "
        "endpoints, 403/404 skipped; loaded with `pipeline.run(rows, table_name=...)` per table, "
        "dlt's default nested normalisation (forms become child tables) and default file format."),
        ("(b) `benchmarks/baseline_rest_api.py`: `rest_api_resources` with bearer auth (token "
        "from one login request first: the service's login is a Basic-auth POST returning a JWT, "
        "which none of rest_api's auth classes performs), the `x-namespace` header, child "
        "resources with `{resources.<parent>.<field>}` path parameters and "
        "`include_from_parent`, `parallelized: True` on every child resource, `response_actions` "
        "ignoring 403/404 (ghost connections' details answer 404), the `header_link` paginator on "
        "the two list endpoints, dlt's own retries, dlt's default nested normalisation. "
        f"`extract.workers = {cfg.concurrency}` gives it as many requests in flight as ours "
        "(one goal row); (b') is the same with dlt's default of 5 workers, what a user gets "
        "without tuning (another goal row). **What rest_api cannot express**: it resolves "
        "one child request per parent *record*, but a connection's readable company types are a "
        "*list inside* its detail record. The closest faithful configuration: a small dlt "
        "transformer (`received_pairs`) explodes each connection detail into (company, type) "
        "records and is listed among the rest_api resources as the parent of the questionnaire "
        "and document resources; the namespace's own types come from user-info (read once "
        "before, as our sync does) through a plain resource; templates are read once per "
        "distinct type through two more helper resources. One client configuration per namespace "
        "(its header differs), all in one source, so the namespaces extract side by side. The "
        "requests served match ours exactly."),
        ("Both baselines land questionnaire forms as nested child tables (dlt's default); ours "
        "lands each questionnaire's forms as one JSON column and flattens them in SQL (DESIGN.md "
         "decision 2), so their normalize and load steps do more work by design."),
    ]
    if not math.isnan(rest_bound):
        section.notes.append(
            f"Upper bound at equal concurrency: with {cfg.concurrency} requests in flight and "
            f"{latency:g} ms per request no client can fetch these requests in less than "
            f"{num(ideal)} s, so against (b) at {cfg.concurrency} workers "
            f"({num(median([e['sync'] for e in results['rest_api']]))} s) the largest possible "
            f"speedup is {num(rest_bound, 1)}x even with zero processing time"
            + ("; a >= 3x goal against it can only be met with more requests in flight than the "
               "baseline, not by faster code. Against dlt's default of 5 workers the bound is "
               "higher." if rest_bound < 3 else "."))
    if cfg.profile and (rest_x < 3 or naive_x < 10):
        if "latency_profile" in cfg.cache and sizes.baselines == sizes.latency:
            section.notes.append("Our side of this scenario is the same run as the latency-bound "
                                 "scenario (same profile, same latency): see its profile above.")
        else:
            section.profiles.append(_profile(
                cfg, "Our sync at the baselines' setting",
                {"kind": "sync", "label": "baselines-profile",
                 "warehouse": str(cfg.warehouse("profiles", "baselines"))},
                scale, {"latency_ms": latency}))
    return section


def _entry(run: Run) -> dict[str, Any]:
    res = run.result
    return {"sync": res["timings"]["sync"], "timings": res["timings"], "requests": run.served,
            "peak": run.child.peak_rss_mb, "counts": res["counts"], "tables": res.get("tables"),
            "failed": res.get("failed", [])}


# -- 5. scaling ---------------------------------------------------------------------------

def _sync_peak(run: dict[str, Any]) -> float:
    """Peak RSS sampled during the sync only (fetch and dlt), not models or exports."""
    phases = run.get("rss_phases") or {}
    values = [v for k, v in phases.items() if k.startswith(("fetch", "dlt"))]
    return max(values) if values else float("nan")


def scaling(cfg: Config) -> Section:
    cfg.fresh("scaling")
    table = Table(["profile", "runs", "requests", "sync wall s", "s per 1,000 requests",
                   "fetch s per 1,000", "dlt s per 1,000", "peak RSS MB during the sync",
                   "rows landed"])
    raw: dict[str, list[dict[str, Any]]] = {}
    reused = []
    for scale in cfg.sizes.scaling:
        if scale == cfg.sizes.throughput and cfg.cache.get("throughput"):
            reused.append(scale)
            raw[scale] = [{"requests": o["requests"], "sync": o["sync"], "fetch": o["fetch"],
                           "dlt": o["dlt_run"], "peak": _sync_peak(o), "rows": o["rows"]}
                          for o in cfg.cache["throughput"]]
            continue
        runs = []
        with sandbox(scale, log_dir=cfg.logs) as sb:
            for r in range(cfg.repeat):
                run = _job(cfg, sb, "sync", "scaling", f"{scale}{r}")
                t = run.timings
                runs.append({"requests": run.served, "sync": t["sync"], "fetch": t["fetch"],
                             "dlt": t["dlt_run"], "peak": _sync_peak(run.result),
                             "rows": run.result["rows"]})
        raw[scale] = runs
    for scale, runs in raw.items():
        med = {k: median([run[k] for run in runs]) for k in runs[0]}
        k = med["requests"] / 1000
        table.rows.append([f"`{scale}`", len(runs), int(med["requests"]), med["sync"],
                           med["sync"] / k, med["fetch"] / k, med["dlt"] / k,
                           num(med["peak"], 0), int(med["rows"])])
    section = Section(
        "scaling", "5. Scaling",
        f"Our sync (`run_sync`, max_concurrency {cfg.concurrency}, no latency) at each profile, "
        f"fresh DuckDB file per run, medians. Peak RSS is sampled every 50 ms during the sync "
        f"(fetch and dlt; imports included, models and exports excluded)."
        + (f" The `{'`, `'.join(reused)}` row reuses the throughput scenario's runs "
           "(same sandbox settings; its models and exports ran after the sync and are not "
           "counted here)." if reused else ""),
        tables=[table], raw=raw)
    if len(raw) > 1:
        names = list(raw)
        first, last = names[0], names[-1]

        def med(scale: str, key: str) -> float:
            return median([r[key] for r in raw[scale]])

        per0 = med(first, "sync") / med(first, "requests")
        per1 = med(last, "sync") / med(last, "requests")
        fetch0 = med(first, "fetch") / med(first, "requests")
        fetch1 = med(last, "fetch") / med(last, "requests")
        n0, n1 = med(first, "requests"), med(last, "requests")
        p0, p1 = med(first, "peak"), med(last, "peak")
        section.notes.append(
            f"From `{first}` to `{last}` the requests grow {n1 / n0:.0f}x. Seconds per request "
            f"change {per1 / per0:.2f}x end to end and {fetch1 / fetch0:.2f}x for the fetch alone "
            f"(1.00 = exactly linear; dlt's fixed cost per run weighs on the small profile). Peak "
            f"memory grows {p1 / p0:.1f}x ({num(p0, 0)} -> {num(p1, 0)} MB, "
            f"{num((p1 - p0) / max(1.0, (n1 - n0) / 1000), 1)} MB more per 1,000 requests)"
            + ". This is the sync alone, in one process with its libraries; the goal of at "
            "most 1.5x is for the whole `diligence sync` (models included), measured side by "
            "side by `python -m benchmarks.engine_v2`.")
    return section


SCENARIOS: dict[str, Callable[[Config], Section]] = {
    "latency": latency_bound,
    "throughput": throughput_bound,
    "rate": rate_limited,
    "baselines": baselines,
    "scaling": scaling,
}


def warm_up(cfg: Config) -> None:
    """One untimed run of every job kind on a small sandbox: fills the bytecode cache."""
    with sandbox("small", log_dir=cfg.logs) as sb:
        for kind in ("sync", "ceiling", "naive", "rest_api"):
            _job(cfg, sb, kind, "warm-up", kind, models=True, export=True)
    cfg.fresh("warm-up")
