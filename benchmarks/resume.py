"""A sync killed half-way, then resumed: what the rerun costs against a full sync.

``python -m benchmarks.resume [--scale medium] [--rate-limit 50] [--repeat 3] [--kill-at 0.5]``

The sandbox (its own process) limits requests with a token bucket (``--rate-limit``
requests/s, 50 by default: a common per-account allowance), as a real service does. Each repetition, side by side on the same
sandbox:

1. **full**: ``diligence sync --no-models`` into a new warehouse (the reference);
2. **killed**: the same into another new warehouse, SIGKILLed once the service has
   answered ``--kill-at`` of the full sync's requests;
3. **resumed**: ``diligence sync --no-models`` again on that warehouse.

Figures: the wall time of each ``diligence`` process and the requests the service
answered for it (``/_sandbox/stats``), medians over the repetitions, and the resumed
sync's share of the full one's.

Every run's rows are compared with the full sync's (``raw`` current rows per table).
What the manifests a resume goes on from cost (the evidence) is measured by
:mod:`benchmarks.evidence`. Writes the part ``resume`` of ``benchmarks/RESULTS.md`` (raw
figures: ``benchmarks/.work/resume.json``).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import httpx

from .harness import ROOT, WORK_DIR, child_env, machine, median, sandbox
from .results_file import publish

PART = "resume"
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
DILIGENCE = str(Path(sys.executable).with_name("diligence"))
EMAIL, PASSWORD = "analyst@example.com", "sandbox-password"
TABLES = ("companies", "connections", "questionnaires", "documents", "questionnaire_templates")


def _env(**settings: str) -> dict[str, str]:
    env = {k: v for k, v in child_env().items() if not k.startswith("SOURCES__")}
    env.update(SOURCES__COMPANY_CONNECTIONS__EMAIL=EMAIL, SOURCES__COMPANY_CONNECTIONS__PASSWORD=PASSWORD)
    env.update({f"SOURCES__COMPANY_CONNECTIONS__{k.upper()}": v for k, v in settings.items()})
    return env


def _total(base_url: str) -> int:
    return int(httpx.get(f"{base_url}/_sandbox/stats", timeout=10).json()["total"])


def _reset(base_url: str) -> None:
    httpx.post(f"{base_url}/_sandbox/stats/reset", timeout=10).raise_for_status()


def _sync(base_url: str, warehouse: Path, *, kill_after: int | None = None,
          **settings: str) -> dict[str, Any]:
    """One ``diligence sync --no-models``: its wall time and the requests answered for it."""
    _reset(base_url)
    log = warehouse.with_suffix(".log").open("ab")
    started = time.perf_counter()
    process = subprocess.Popen(
        [DILIGENCE, "sync", "--no-models", "--base-url", base_url, "-w", str(warehouse)],
        cwd=warehouse.parent, env=_env(**settings), stdout=log, stderr=subprocess.STDOUT)
    try:
        if kill_after is not None:
            while _total(base_url) < kill_after and process.poll() is None:
                time.sleep(0.01)
            process.send_signal(signal.SIGKILL)
        code = process.wait(timeout=1800)
    finally:
        log.close()
        if process.poll() is None:
            process.kill()
    seconds = time.perf_counter() - started
    if kill_after is None and code != 0:
        raise RuntimeError(f"diligence sync exited {code}; see {warehouse.with_suffix('.log')}")
    return {"seconds": seconds, "requests": _total(base_url), "exit": code}


def _rows(warehouse: Path) -> dict[str, int]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        return {t: con.execute(f"select count(*) from raw.{t}"
                               + (" where _dlt_valid_to is null" if t != "questionnaire_templates" else ""))
                .fetchone()[0] for t in TABLES}


def run(scale: str, rate_limit: float, repeat: int, kill_at: float) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    with sandbox(scale, rate_limit=rate_limit, log_dir=WORK_DIR / "resume") as box, \
            tempfile.TemporaryDirectory(dir=WORK_DIR) as tmp:
        for number in range(repeat):
            root = Path(tmp) / str(number)
            root.mkdir()
            full = _sync(box.base_url, root / "full.duckdb")
            killed = _sync(box.base_url, root / "resumed.duckdb", kill_after=int(kill_at * full["requests"]))
            resumed = _sync(box.base_url, root / "resumed.duckdb")
            exact = _rows(root / "resumed.duckdb") == _rows(root / "full.duckdb")
            runs.append({"full": full, "killed": killed, "resumed": resumed, "exact": exact})
            print(f"run {number + 1}: full {full['seconds']:.1f} s / {full['requests']} requests; killed at "
                  f"{killed['requests']}; resumed {resumed['seconds']:.1f} s / {resumed['requests']} "
                  f"requests; {'exact' if exact else 'ROWS DIFFER'}", flush=True)
    return {"scale": scale, "rate_limit": rate_limit, "kill_at": kill_at, "runs": runs}


def render(results: dict[str, Any]) -> str:
    m = machine()
    runs = results["runs"]

    def med(kind: str, key: str) -> float:
        return median([r[kind][key] for r in runs])

    share_requests = median([r["resumed"]["requests"] / r["full"]["requests"] for r in runs])
    share_seconds = median([r["resumed"]["seconds"] / r["full"]["seconds"] for r in runs])
    killed_share = median([r["killed"]["requests"] / r["full"]["requests"] for r in runs])
    exact = all(r["exact"] for r in runs)
    lines = [
        "## Resuming an interrupted sync",
        "",
        f"`python -m benchmarks.resume --scale {results['scale']} --rate-limit {results['rate_limit']:g} "
        f"--repeat {len(runs)} --kill-at {results['kill_at']:g}` on {m.date} ({m.cores} cores, load average "
        f"{m.load_average}; raw figures: `benchmarks/.work/resume.json`). A `{results['scale']}` sandbox "
        f"whose token bucket allows {results['rate_limit']:g} requests/s; `diligence sync --no-models` "
        f"(one process each) into a new warehouse, then into another one SIGKILLed once "
        f"{killed_share:.0%} of a full sync's requests were answered, then again on that one. "
        f"Medians of {len(runs)} runs, side by side on one sandbox.",
        "",
        "| sync | wall (s) | requests answered | share of a full sync (time, requests) |",
        "|---|---|---|---|",
        f"| full | {med('full', 'seconds'):.1f} | {med('full', 'requests'):,.0f} | 100 %, 100 % |",
        f"| killed | {med('killed', 'seconds'):.1f} | {med('killed', 'requests'):,.0f} | "
        f"{median([r['killed']['seconds'] / r['full']['seconds'] for r in runs]):.0%}, {killed_share:.0%} |",
        f"| resumed | {med('resumed', 'seconds'):.1f} | {med('resumed', 'requests'):,.0f} | "
        f"**{share_seconds:.0%}, {share_requests:.0%}** |",
        "",
        f"The resumed sync's rows equal the full sync's: {'yes, every run' if exact else 'NO'} "
        "(current rows of every `raw` table). Goal: at most 55 % of a full sync's requests and time.",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.resume", description=__doc__.split("\n\n")[1])
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--rate-limit", type=float, default=50.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kill-at", type=float, default=0.5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    results = run(args.scale, args.rate_limit, args.repeat, args.kill_at)
    publish(results, WORK_DIR / "resume.json", args.out, PART, render(results))
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
