"""``python -m benchmarks.client_speed --before DIR [--repeat 3] [--out FILE]``

The client's speed, before and after, side by side in one run: the same sandbox
process serves both code trees, alternately, so load from other users of the
machine falls on both. `--before` is a checkout of the earlier code (for example
``git archive 7ac3c81 | tar -x -C /tmp/before-client``); it runs with this venv.

Scenarios (medians of `--repeat` runs each):

* **fetch CPU**: a sync of the ``medium`` profile, no latency, concurrency 16; the
  client process's CPU seconds during the fetch divided by the requests served.
* **throughput**: a sync of the ``large`` profile, no latency: requests served per
  second of the whole sync (login to the last row loaded).
* **rest_api**: ours (after) against dlt's ``rest_api`` source with 16 workers, on
  ``medium`` with no latency (the client's work decides) and with 50 ms latency
  (the network decides: 16 requests in flight bound any client).
* **start-up**: wall time of ``diligence --help`` and ``--version`` (medians of 5),
  with ``-X importtime``'s heaviest imports of the after tree.

With `--profile`, one fetch of each tree also runs under py-spy (if installed) and
the summary of its samples per package is printed.
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
from collections import Counter
from pathlib import Path
from typing import Any

from .harness import ROOT, WORK_DIR, Sandbox, child_env, sandbox

TIMEOUT = 1800.0


def _env(tree: Path) -> dict[str, str]:
    env = child_env()
    env["PYTHONPATH"] = str(tree)
    return env


def run_job(tree: Path, job: dict[str, Any], sb: Sandbox, *,
            profile: Path | None = None) -> dict[str, Any]:
    """Run one benchmark job with `tree`'s code in a child; add the sandbox's counters."""
    sb.reset_stats()
    work = Path(tempfile.mkdtemp(dir=WORK_DIR))
    try:
        job = {"base_url": sb.base_url, "warehouse": str(work / "warehouse.duckdb"),
               "max_concurrency": 16, "concurrency": 16, "workers": 16, **job}
        (work / "job.json").write_text(json.dumps(job))
        cmd = [sys.executable, "-m", "benchmarks.worker", str(work / "job.json"),
               str(work / "result.json")]
        if profile is not None:
            cmd = [str(Path(sys.executable).with_name("py-spy")), "record", "--rate", "250",
                   "--format", "raw", "--nonblocking", "--output", str(profile), "--", *cmd]
        done = subprocess.run(cmd, cwd=tree, env=_env(tree), capture_output=True, text=True,
                              timeout=TIMEOUT)
        if done.returncode != 0:
            raise RuntimeError(f"{tree}: {job['kind']} failed: {done.stderr[-3000:]}")
        result = json.loads((work / "result.json").read_text())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result["served"] = sb.stats()["total"]
    return result


def _sync_figures(result: dict[str, Any]) -> dict[str, float]:
    t, served = result["timings"], result["served"]
    return {"cpu_ms": 1000 * t["cpu_fetch"] / served, "fetch_s": t["fetch"], "sync_s": t["sync"],
            "rps": served / t["sync"], "fetch_rps": served / t["fetch"], "requests": served,
            "failed": len(result["failed"])}


def _med(runs: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in runs)


def sync_side_by_side(before: Path, scale: str, repeat: int) -> dict[str, list[dict[str, float]]]:
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    with sandbox(scale, log_dir=WORK_DIR / "logs") as sb:
        for r in range(repeat):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for who in order:
                tree = before if who == "before" else ROOT
                runs[who].append(_sync_figures(run_job(tree, {"kind": "sync"}, sb)))
                print(f"  {scale} {who} run {r}: {runs[who][-1]}", flush=True)
    return runs


def rest_api_side_by_side(latency_ms: float, repeat: int) -> dict[str, list[float]]:
    walls: dict[str, list[float]] = {"ours": [], "rest_api": []}
    with sandbox("medium", latency_ms=latency_ms, log_dir=WORK_DIR / "logs") as sb:
        for r in range(repeat):
            ours = run_job(ROOT, {"kind": "sync"}, sb)
            walls["ours"].append(ours["timings"]["sync"])
            rest = run_job(ROOT, {"kind": "rest_api"}, sb)
            walls["rest_api"].append(rest["timings"]["sync"])
            print(f"  rest_api {latency_ms} ms run {r}: ours {walls['ours'][-1]:.2f} s, "
                  f"rest_api {walls['rest_api'][-1]:.2f} s", flush=True)
    return walls


def startup(before: Path, runs: int = 5) -> dict[str, Any]:
    """Median wall seconds of ``diligence --help``/``--version`` per tree, as users run it."""
    env = dict(os.environ)
    figures: dict[str, Any] = {}
    for who, tree in (("before", before), ("after", ROOT)):
        for args in (["--help"], ["--version"]):
            if who == "before" and args == ["--version"]:
                continue  # the earlier CLI had no --version
            walls = []
            for _ in range(runs):
                started = time.perf_counter()
                subprocess.run([sys.executable, "-c", "from diligence.cli import app; app()", *args],
                               cwd=tree, env={**env, "PYTHONPATH": str(tree)}, capture_output=True,
                               timeout=120, check=True)
                walls.append(time.perf_counter() - started)
            figures[f"{who} {' '.join(args)}"] = statistics.median(walls)
    done = subprocess.run([sys.executable, "-X", "importtime", "-c",
                           "from diligence.cli import app; app()", "--help"], cwd=ROOT,
                          env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=120)
    rows = []
    for line in done.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    figures["importtime_top"] = sorted(rows, reverse=True)[:8]
    figures["importtime_total_ms"] = max((us for us, _ in rows), default=0) / 1000
    return figures


def summarize_profile(path: Path) -> dict[str, Any]:
    """Self time per package of py-spy's samples taken during the fetch.

    The fetch is every stack under asyncio's runner (dlt's extract, normalize and
    load run outside it); a sample is charged to the package of its innermost frame.
    """
    counts: Counter[str] = Counter()
    total = everything = 0
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        everything += int(n)
        if "run_until_complete" not in stack and "Runner.run" not in stack:
            continue
        frame = stack.split(";")[-1]
        location = frame.rpartition(" (")[2]
        top = location.split("/", 1)[0] if "/" in location else location.split(".py", 1)[0]
        counts[top.split(":")[0]] += int(n)
        total += int(n)
    shares = [(name, round(100 * n / total, 1)) for name, n in counts.most_common(14)]
    return {"fetch_samples": total, "all_samples": everything, "self_share_pct": shares}


def _fmt(value: float, digits: int = 2) -> str:
    return f"{value:,.{digits}f}"


def render(results: dict[str, Any], profile: dict[str, Any] | None = None) -> str:
    """The results as a markdown section for `docs/benchmarks-history.md` (its headline goes
    to `benchmarks/RESULTS.md`)."""
    lines = []
    for name, title in (("fetch", "`medium`, no latency, concurrency 16"),
                        ("throughput", "`large`, no latency, concurrency 16")):
        if name not in results:
            continue
        runs = results[name]
        lines += [f"*{name}: {title}; medians of {len(runs['after'])} side-by-side runs*", "",
                  "| figure | before (7ac3c81) | after | after / before | each run, before | "
                  "each run, after |", "|---|---:|---:|---:|---|---|"]
        for key, label, digits in (("cpu_ms", "client CPU ms per request during the fetch", 2),
                                   ("fetch_rps", "requests/s during the fetch", 0),
                                   ("rps", "requests/s end to end (login to last row loaded)", 0),
                                   ("fetch_s", "fetch s", 2), ("sync_s", "sync s (end to end)", 2)):
            before, after = _med(runs["before"], key), _med(runs["after"], key)
            lines.append(f"| {label} | {_fmt(before, digits)} | {_fmt(after, digits)} | "
                         f"{after / before:.2f}x | "
                         f"{' / '.join(_fmt(r[key], digits) for r in runs['before'])} | "
                         f"{' / '.join(_fmt(r[key], digits) for r in runs['after'])} |")
        served = {int(r["requests"]) for r in runs["before"] + runs["after"]}
        failed = sum(r["failed"] for r in runs["before"] + runs["after"])
        lines += ["", f"Requests served per sync: {', '.join(map(str, sorted(served)))}; "
                  f"failed namespaces: {failed}.", ""]
    for ms, walls in results.get("rest_api", {}).items():
        ratios = [b / a for a, b in zip(walls["ours"], walls["rest_api"], strict=True)]
        lines += [f"*dlt `rest_api` (16 workers) against ours (after, max_concurrency 16), "
                  f"`medium`, {ms} ms latency*", "",
                  "| contender | wall s (median) | each run s |", "|---|---:|---|",
                  f"| ours | {_fmt(statistics.median(walls['ours']))} | "
                  f"{' / '.join(_fmt(w) for w in walls['ours'])} |",
                  f"| rest_api, 16 workers | {_fmt(statistics.median(walls['rest_api']))} | "
                  f"{' / '.join(_fmt(w) for w in walls['rest_api'])} |",
                  "", f"Speedup, paired by repetition: median **{statistics.median(ratios):.1f}x** "
                  f"({' / '.join(f'{r:.1f}' for r in ratios)}).", ""]
    if "startup" in results:
        st = results["startup"]
        lines += ["*Start-up: wall seconds, medians of 5, as a user runs it "
                  "(`PYTHONDONTWRITEBYTECODE=1` as on this machine; the venv compiled at install)*",
                  "", "| command | before | after |", "|---|---:|---:|",
                  f"| `diligence --help` | {_fmt(st['before --help'])} | {_fmt(st['after --help'])} |",
                  f"| `diligence --version` | (none) | {_fmt(st['after --version'])} |", "",
                  f"`-X importtime` of `diligence --help` (after): {st['importtime_total_ms']:.0f} ms "
                  "of imports in all; the heaviest (cumulative us, module):", "", "```"]
        lines += [f"{us:>9}  {name}" for us, name in st["importtime_top"]]
        lines += ["```", ""]
    if profile:
        lines += ["*py-spy (250 Hz, `--nonblocking`) of one `medium` sync per tree: self time per "
                  "package of the samples taken during the fetch (under asyncio's runner)*", "",
                  "| | before | after |", "|---|---|---|"]
        before, after = profile["before"], profile["after"]
        lines.append(f"| fetch samples | {before['packages']['fetch_samples']} | "
                     f"{after['packages']['fetch_samples']} |")
        lines.append(f"| client CPU ms/request in that run | {_fmt(before['figures']['cpu_ms'])} | "
                     f"{_fmt(after['figures']['cpu_ms'])} |")
        for i in range(8):
            cells = []
            for side in (before, after):
                shares = side["packages"]["self_share_pct"]
                cells.append(f"{shares[i][0]} {shares[i][1]} %" if i < len(shares) else "")
            lines.append(f"| #{i + 1} | {cells[0]} | {cells[1]} |")
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.client_speed")
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scenarios", default="fetch,throughput,rest_api,startup")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--out", type=Path, default=WORK_DIR / "client_speed.json")
    parser.add_argument("--render", nargs="+", type=Path, metavar="JSON",
                        help="print the markdown of saved results (and a profile JSON) and exit")
    args = parser.parse_args(argv)
    if args.render:
        saved = [json.loads(path.read_text()) for path in args.render]
        merged = {k: v for d in saved for k, v in d.items()}
        print(render(merged, merged.get("profile")))
        return
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    chosen = set(args.scenarios.split(","))
    results: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
                               "repeat": args.repeat}
    if "profile" in chosen or args.profile:
        profiles = {}
        with sandbox("medium", log_dir=WORK_DIR / "logs") as sb:
            for who, tree in (("before", args.before), ("after", ROOT)):
                path = WORK_DIR / f"pyspy-{who}.txt"
                result = run_job(tree, {"kind": "sync"}, sb, profile=path)
                profiles[who] = {"figures": _sync_figures(result),
                                 "packages": summarize_profile(path)}
                print(who, json.dumps(profiles[who], indent=1), flush=True)
        results["profile"] = profiles
    if "fetch" in chosen:
        results["fetch"] = sync_side_by_side(args.before, "medium", args.repeat)
    if "throughput" in chosen:
        results["throughput"] = sync_side_by_side(args.before, "large", args.repeat)
    if "rest_api" in chosen:
        results["rest_api"] = {str(ms): rest_api_side_by_side(ms, args.repeat) for ms in (0, 50)}
    if "startup" in chosen:
        results["startup"] = startup(args.before)
    args.out.write_text(json.dumps(results, indent=1))
    for name in ("fetch", "throughput"):
        if name in results:
            runs = results[name]
            print(f"{name}: " + ", ".join(
                f"{key} before {_med(runs['before'], key):.3f} after {_med(runs['after'], key):.3f}"
                for key in ("cpu_ms", "rps", "sync_s")))
    for ms, walls in results.get("rest_api", {}).items():
        ratios = [b / a for a, b in zip(walls["ours"], walls["rest_api"], strict=True)]
        print(f"rest_api at {ms} ms: speedup median {statistics.median(ratios):.2f}x {ratios}")
    if "startup" in results:
        print(json.dumps(results["startup"], indent=1))


if __name__ == "__main__":
    main()
