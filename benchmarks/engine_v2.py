"""Sync engine v2 against the code before it, side by side: memory, latency, throughput.

``python -m benchmarks.engine_v2 --before DIR [--repeat 3] [--out FILE]``

`DIR` is a checkout of the code before the engine rewrite (e.g. ``git worktree add
/tmp/before-engine 7ac3c81``); both trees run with this venv's interpreter, each with
its own tree first on ``sys.path``, against the same sandbox process (started from
this tree; the sandbox did not change). Every repetition runs BEFORE then AFTER, so
both see the same machine load; figures are medians.

Figures (issue 11):

* **memory**: peak RSS (``ru_maxrss`` from ``wait4``) of ``diligence sync`` as users
  run it (CLI, models included) on the ``small`` and ``large`` profiles; flat means
  large/small <= 1.5;
* **latency**: ``medium`` with 50 ms per response, concurrency 16: the whole
  ``run_sync`` against the ideal ``requests x latency / concurrency``. The clock starts
  after the process's start-up imports (dlt, pyarrow, the client), as for the first
  latency figure of ``make bench``; they are timed on their own. Two bounds are taken in
  the same repetition: a bare fetch of the same URLs (``benchmarks.ceiling``: stock
  httpx, every URL known up front, bodies dropped) and our fetch alone (the stream with
  nothing loaded);
* **throughput**: ``large`` without latency: a bare concurrent fetch of the same
  requests (``benchmarks.ceiling``, uvloop) over the whole ``run_sync``.

The latency figure is also taken apart: time to the first response (set-up: settings,
lock, login, user-info; the first response comes one latency after the first request)
and the tail after the last response (the last namespace's dlt run). The machine's
load average is recorded before and after each figure, since a shared machine's load
moves every absolute time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .harness import EMAIL, PASSWORD, ROOT, WORK_DIR, child_env, run_child, sandbox

DRIVER = """
import json, sys, time
from pathlib import Path
begun = time.perf_counter()
from diligence.sync import run_sync
import pipelines.company_connections  # dlt, pyarrow, the client: a process's start-up imports
imported = time.perf_counter()

class Responses:
    # when the first and the last response of the sync arrived (progress listener)
    first = last = None
    def planned(self, namespace, requests):
        pass
    def waiting(self, namespace, state):
        pass
    def done(self, namespace, requests, rows):
        if requests:
            now = time.perf_counter()
            self.first = self.first or now
            self.last = now

responses = Responses()
started = time.perf_counter()
options = {"email": sys.argv[3], "password": sys.argv[4], "token_store_path": None, "max_concurrency": 16}
try:  # the settings resolved at the edge (this tree) or by run_sync (older trees)
    from diligence.sync import source_settings
except ImportError:
    result = run_sync(Path(sys.argv[1]), base_url=sys.argv[2], progress=responses, source_options=options)
else:
    result = run_sync(Path(sys.argv[1]), source_settings(base_url=sys.argv[2], **options), progress=responses)
ended = time.perf_counter()
assert not result.failed, [o.error for o in result.failed]
print(json.dumps({"wall": ended - started, "requests": result.requests + 1, "rows": result.rows,
                  "first_response": responses.first - started,
                  "tail": ended - responses.last, "imports": imported - begun}))
"""

FETCH_DRIVER = """
import json, sys, tempfile, time
from pathlib import Path
from pipelines.company_connections import resolve_settings, stream_namespaces
settings = resolve_settings(base_url=sys.argv[2], email=sys.argv[3], password=sys.argv[4],
                            token_store_path=None, max_concurrency=16)
started = time.perf_counter()
requests = 0
with stream_namespaces(settings, staging_dir=Path(sys.argv[1]) / "staging") as stream:
    for result in stream:
        requests += result.requests
ended = time.perf_counter()
print(json.dumps({"wall": ended - started, "requests": requests + 1}))
"""


def _env(tree: Path) -> dict[str, str]:
    env = child_env()
    env["PYTHONPATH"] = str(tree)
    env["SOURCES__COMPANY_CONNECTIONS__EMAIL"] = EMAIL
    env["SOURCES__COMPANY_CONNECTIONS__PASSWORD"] = PASSWORD
    env["SOURCES__COMPANY_CONNECTIONS__TOKEN_STORE_PATH"] = ""
    return env


def _run(cmd: list[str], tree: Path, timeout: float = 1800) -> tuple[str, float, float]:
    """Run `cmd` in `tree`; (stdout, wall seconds, peak RSS MB)."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(cmd, cwd=tree, env=_env(tree), stdout=out, stderr=subprocess.PIPE)
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        out.seek(0)
        text = out.read().decode(errors="replace")
        err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} failed in {tree}:\n{text[-2000:]}\n{err[-2000:]}")
    return text, wall, rusage.ru_maxrss / 1024


def cli_sync(tree: Path, base_url: str, folder: Path) -> float:
    """Peak RSS (MB) of `diligence sync` (models included) from `tree`."""
    warehouse = folder / "warehouse.duckdb"
    _, _, peak = _run([sys.executable, "-m", "diligence", "sync", "--base-url", base_url,
                       "--warehouse", str(warehouse)], tree)
    return peak


def driver_sync(tree: Path, base_url: str, folder: Path) -> dict[str, Any]:
    """`run_sync` from `tree`: its own wall time (imports excluded), requests, peak RSS."""
    text, _, peak = _run([sys.executable, "-c", DRIVER, str(folder / "warehouse.duckdb"),
                          base_url, EMAIL, PASSWORD], tree)
    result = json.loads(text.strip().splitlines()[-1])
    result["peak_rss_mb"] = peak
    return result


def fetch_only(tree: Path, base_url: str, folder: Path) -> dict[str, Any]:
    """The sync's fetch and staging from `tree` with nothing loaded: login to the last
    namespace staged (the figure a whole sync could reach with a free load)."""
    text, _, _ = _run([sys.executable, "-c", FETCH_DRIVER, str(folder), base_url, EMAIL, PASSWORD], tree)
    return json.loads(text.strip().splitlines()[-1])


def tree_label(tree: Path) -> str:
    """The short commit of `tree` (a git checkout), or its folder name."""
    try:
        out = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=30, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return tree.name


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def ceiling(base_url: str, log_dir: Path) -> float:
    child = run_child({"kind": "ceiling", "label": "engine-v2", "base_url": base_url,
                       "concurrency": 16, "loop": "uvloop"}, timeout=900, log_dir=log_dir)
    return float(child.result["timings"]["fetch"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.engine_v2")
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, default=ROOT,
                        help="checkout of the new code (default: this tree)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--figures", default="memory,latency,throughput")
    parser.add_argument("--out", type=Path, default=WORK_DIR / "engine-v2.json")
    args = parser.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    figures = args.figures.split(",")
    work = WORK_DIR / "engine-v2"
    work.mkdir(parents=True, exist_ok=True)
    raw: dict[str, Any] = {"repeat": args.repeat,
                           "labels": {label: tree_label(tree) for label, tree in trees.items()},
                           "load": {}}
    if "memory" in figures:
        raw["load"]["memory_start"] = load_average()
        for scale in ("small", "large"):
            with sandbox(scale, log_dir=work) as box:
                for i in range(args.repeat):
                    for label, tree in trees.items():
                        with tempfile.TemporaryDirectory(dir=work) as tmp:
                            peak = cli_sync(tree, box.base_url, Path(tmp))
                        raw.setdefault(f"rss_{scale}_{label}", []).append(peak)
                        print(f"memory {scale} {label} run {i + 1}: {peak:.0f} MB", flush=True)
    if "latency" in figures:
        raw["load"]["latency_start"] = load_average()
        with sandbox("medium", latency_ms=50, log_dir=work) as box:
            for i in range(args.repeat):
                # the bounds, on the same sandbox in the same repetition: a bare fetch of
                # the same URLs (stock httpx, every URL known up front) and our fetch alone
                bare = ceiling(box.base_url, work)
                with tempfile.TemporaryDirectory(dir=work) as tmp:
                    alone = fetch_only(args.after, box.base_url, Path(tmp))
                ideal = alone["requests"] * 0.050 / 16
                raw.setdefault("latency_bare", []).append(bare)
                raw.setdefault("latency_fetch_only", []).append({**alone, "ideal": ideal})
                print(f"latency bounds run {i + 1}: bare fetch {bare:.2f} s, our fetch alone "
                      f"{alone['wall']:.2f} s, ideal {ideal:.2f} s", flush=True)
                for label, tree in trees.items():
                    with tempfile.TemporaryDirectory(dir=work) as tmp:
                        res = driver_sync(tree, box.base_url, Path(tmp))
                    ideal = res["requests"] * 0.050 / 16
                    raw.setdefault(f"latency_{label}", []).append({**res, "ideal": ideal})
                    print(f"latency {label} run {i + 1}: {res['wall']:.2f} s, ideal {ideal:.2f} s, "
                          f"{ideal / res['wall']:.1%} (first response {res['first_response']:.2f} s, "
                          f"tail {res['tail']:.2f} s)", flush=True)
    if "throughput" in figures:
        raw["load"]["throughput_start"] = load_average()
        with sandbox("large", log_dir=work) as box:
            for i in range(args.repeat):
                bare = ceiling(box.base_url, work)
                raw.setdefault("ceiling", []).append(bare)
                for label, tree in trees.items():
                    with tempfile.TemporaryDirectory(dir=work) as tmp:
                        res = driver_sync(tree, box.base_url, Path(tmp))
                    raw.setdefault(f"throughput_{label}", []).append(res)
                    print(f"throughput {label} run {i + 1}: {res['wall']:.2f} s vs bare fetch "
                          f"{bare:.2f} s: {bare / res['wall']:.2f}", flush=True)
    raw["load"]["end"] = load_average()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(raw, indent=1))
    print(summary(raw))


def summary(raw: dict[str, Any]) -> str:
    med = statistics.median
    labels = raw.get("labels", {"before": "before", "after": "after"})
    lines = [f"| figure | before ({labels['before']}) | after ({labels['after']}) | goal |",
             "|---|---|---|---|"]
    if "rss_large_after" in raw:
        b_s, a_s = med(raw["rss_small_before"]), med(raw["rss_small_after"])
        b_l, a_l = med(raw["rss_large_before"]), med(raw["rss_large_after"])
        lines.append(f"| peak RSS of `diligence sync`, small | {b_s:.0f} MB | {a_s:.0f} MB | |")
        lines.append(f"| peak RSS of `diligence sync`, large | {b_l:.0f} MB | {a_l:.0f} MB | < 700 MB |")
        lines.append(f"| growth large / small (120x the connections) | {b_l / b_s:.2f}x | {a_l / a_s:.2f}x | <= 1.5x |")
    if "latency_after" in raw:
        for label in ("before", "after"):
            runs = raw[f"latency_{label}"]
            raw[f"util_{label}"] = med(r["ideal"] / r["wall"] for r in runs)
            raw[f"lat_wall_{label}"] = med(r["wall"] for r in runs)
        ideal = raw["latency_after"][0]["ideal"]
        lines.append(f"| medium, 50 ms, concurrency 16: whole sync (ideal {ideal:.2f} s) | "
                     f"{raw['lat_wall_before']:.2f} s = {raw['util_before']:.1%} | "
                     f"{raw['lat_wall_after']:.2f} s = {raw['util_after']:.1%} | >= 88 % |")
        parts = {label: {key: med(r[key] for r in raw[f"latency_{label}"] if key in r)
                         for key in ("first_response", "tail")}
                 for label in ("before", "after")
                 if all("tail" in r for r in raw[f"latency_{label}"])}
        if len(parts) == 2:
            for key, name in (("first_response", "first response after"), ("tail", "tail after the last response")):
                lines.append(f"| same: {name} | {parts['before'][key]:.2f} s | {parts['after'][key]:.2f} s | |")
        if all("imports" in r for label in ("before", "after") for r in raw[f"latency_{label}"]):
            imports = {label: med(r["imports"] for r in raw[f"latency_{label}"]) for label in ("before", "after")}
            lines.append(f"| same: start-up imports, before the sync's clock | {imports['before']:.2f} s | "
                         f"{imports['after']:.2f} s | |")
        if raw.get("latency_fetch_only"):
            bare = med(raw["latency_bare"])
            alone = med(r["wall"] for r in raw["latency_fetch_only"])
            lines.append(f"| bound: bare fetch of the same URLs (stock httpx) | | {bare:.2f} s = "
                         f"{ideal / bare:.1%} | |")
            lines.append(f"| bound: our fetch alone, nothing loaded | | {alone:.2f} s = {ideal / alone:.1%} | |")
    if "throughput_after" in raw:
        bare = med(raw["ceiling"])
        for label in ("before", "after"):
            raw[f"tp_wall_{label}"] = med(r["wall"] for r in raw[f"throughput_{label}"])
        lines.append(f"| large, no latency: bare fetch {bare:.2f} s over whole sync | "
                     f"{raw['tp_wall_before']:.2f} s = {bare / raw['tp_wall_before']:.2f} | "
                     f"{raw['tp_wall_after']:.2f} s = {bare / raw['tp_wall_after']:.2f} | >= 0.8 |")
    if raw.get("load"):
        lines.append("")
        lines.append("load average (1, 5, 15 min): " + "; ".join(
            f"{when} {' '.join(str(x) for x in values)}" for when, values in raw["load"].items()))
    return "\n".join(lines)


if __name__ == "__main__":
    main()
