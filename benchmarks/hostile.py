"""A hostile service, side by side: our sync and dlt's ``rest_api`` under the same faults.

``python -m benchmarks.hostile [--scale medium] [--repeat 1]`` runs each scenario on a
sandbox of its own (a separate process), with every contender in a child process of its
own (:func:`benchmarks.harness.run_child`), and writes the part ``hostile`` of
``benchmarks/RESULTS.md``:

* **clean**: no faults (the reference time);
* **shedding + 503** (+ **token storm**): 429 (``Retry-After: 1``) on every 11th
  request, 503 on every 7th (and every token revoked after 40 uses). "Pause everything" is the time a
  client that stops every request for each ``Retry-After`` would need at least: the
  clean time plus one second per 429;
* **3 % random 429**, against a clean run with the same 100 ms latency;
* **token bucket 50 req/s**: a real rate limit, which slowing down does fix.

A contender's rows are compared with the sandbox's ground truth (connections,
questionnaires, documents per namespace): "exact" or what differs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import counts
from .harness import WORK_DIR, BenchError, machine, median, run_child, sandbox
from .results_file import write_part

PART = "hostile"
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"

#: name -> (sandbox flags, the clean scenario it is compared with)
SCENARIOS: dict[str, tuple[list[str], str | None]] = {
    "clean": ([], None),
    "shedding 1/11 + 503 1/7": (["--shed-every", "11", "--error-every", "7"], "clean"),
    "shedding 1/11 + 503 1/7 + token revoked every 40 uses": (
        ["--shed-every", "11", "--error-every", "7", "--revoke-after-uses", "40"], "clean"),
    "clean, 100 ms latency": (["--latency-ms", "100"], None),
    "3 % random 429, 100 ms latency": (
        ["--latency-ms", "100", "--shed-percent", "3"], "clean, 100 ms latency"),
    "token bucket 50 req/s": (["--rate-limit", "50"], None),
}
CONTENDERS = ("sync", "rest_api")
LABELS = {"sync": "ours", "rest_api": "dlt rest_api"}


def _run(kind: str, base_url: str, root: Path, label: str) -> dict[str, Any]:
    job = {"kind": kind, "label": label, "base_url": base_url,
           "warehouse": str(root / f"{label}.duckdb"), "workers": 16}
    try:
        child = run_child(job, timeout=900, log_dir=WORK_DIR / "hostile")
    except BenchError as exc:  # its last line is the error that ended the child
        lines = [line for line in str(exc).splitlines() if line.strip()]
        return {"seconds": None, "error": lines[-1][:160]}
    result = child.result
    return {"seconds": result["timings"]["sync"], "counts": result["counts"],
            "failed": result.get("failed") or []}


def run_scenarios(scale: str, repeat: int) -> dict[str, Any]:
    """Every scenario and contender, `repeat` times; medians of the seconds."""
    out: dict[str, Any] = {}
    root = Path(tempfile.mkdtemp(prefix="diligence-bench-hostile-"))
    for name, (flags, _) in SCENARIOS.items():
        with sandbox(scale, extra=flags, log_dir=WORK_DIR / "hostile") as box:
            truth = counts.truth_counts(box.truth())
            rows: dict[str, Any] = {}
            for kind in CONTENDERS:
                runs = []
                for index in range(repeat):
                    box.reset_stats()
                    label = f"{kind}-{len(out)}-{index}"
                    run = _run(kind, box.base_url, root, label)
                    stats = box.stats()
                    run["requests"] = stats["total"]
                    run["injected"] = stats["injected"]
                    run["exact"] = run.get("counts") == truth and not run.get("failed")
                    runs.append(run)
                    print(f"{name} / {LABELS[kind]}: {run.get('seconds')} s, "
                          f"{stats['total']} requests, exact={run['exact']}", file=sys.stderr)
                rows[kind] = runs
            out[name] = rows
    return out


def _fmt(seconds: float | None) -> str:
    return "failed" if seconds is None else f"{seconds:.1f} s"


def render(results: dict[str, Any], repeat: int) -> str:
    """The results part: one row per scenario and contender."""
    lines = [
        "## A hostile service (`python -m benchmarks.hostile`)",
        "",
        f"Medium sandbox, each scenario on a sandbox of its own, median of {repeat} "
        f"run(s) per contender, side by side in one run on {machine().cpu} ({machine().cores} cores), "
        f"{machine().date}. "
        "\"Exact\": the rows match the sandbox's ground truth. \"Pause everything\": the "
        "clean time plus 1 s per 429, the least a client that stops every request for "
        "each Retry-After would need.",
        "",
        "| scenario | contender | time | vs clean | requests | 429 / 503 / revoked | exact |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, rows in results.items():
        reference = SCENARIOS[name][1]
        for kind, runs in rows.items():
            seconds = [r["seconds"] for r in runs if r["seconds"] is not None]
            time = median(seconds) if len(seconds) == len(runs) else None
            clean = results.get(reference or "", {}).get(kind)
            clean_seconds = [r["seconds"] for r in clean or [] if r["seconds"] is not None]
            ratio = (f"{time / median(clean_seconds):.1f}x" if time and clean_seconds else "")
            injected = runs[-1]["injected"]
            faults = (f"{injected.get('shed', 0) + injected.get('rate_limited', 0)} / "
                      f"{injected.get('error', 0)} / {injected.get('token_revoked', 0)}")
            exact = "yes" if all(r["exact"] for r in runs) else (
                runs[-1].get("error") or "; ".join(runs[-1].get("failed", []))[:120] or "no")
            lines.append(f"| {name} | {LABELS[kind]} | {_fmt(time)} | {ratio} | "
                         f"{runs[-1]['requests']} | {faults} | {exact} |")
        if reference == "clean":
            clean_ours = [r["seconds"] for r in results["clean"]["sync"]]
            shed = rows["sync"][-1]["injected"].get("shed", 0)
            lines.append(f"| {name} | pause everything (computed) | "
                         f"{median(clean_ours) + shed:.1f} s | | | {shed} 429s x 1 s | |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hostile")
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    results = run_scenarios(args.scale, args.repeat)
    text = render(results, args.repeat)
    write_part(args.out, PART, text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
