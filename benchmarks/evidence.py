"""What keeping the evidence costs: a sync's time with it and without, and the store's growth.

``python -m benchmarks.evidence [--scale medium] [--latency-ms 40] [--repeat 5] [--syncs 10]``

1. **Cost**: a ``--scale`` sandbox answering after ``--latency-ms`` (its own process);
   ``diligence sync --no-models`` (one process each) into a new warehouse with the
   evidence kept (the default) and with ``[evidence] enabled = false``
   (``EVIDENCE__ENABLED=false``), alternating, ``--repeat`` pairs. Figures: the sync's own
   seconds (``--json-summary``: fetch and load, without the process's start-up) and the
   process's wall time, medians, and the median of the paired ratios.
2. **Growth**: ``--syncs`` syncs in a row of the unchanged world into one warehouse (no
   latency); the store's bytes (files, and blocks on disk) after the first and after the
   last, and ``diligence verify``'s time and line on the result.

Writes the part ``evidence`` of ``benchmarks/RESULTS.md`` (raw figures:
``benchmarks/.work/evidence.json``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .harness import ROOT, WORK_DIR, child_env, machine, median, sandbox
from .results_file import publish

PART = "evidence"
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
DILIGENCE = str(Path(sys.executable).with_name("diligence"))
EMAIL, PASSWORD = "analyst@example.com", "sandbox-password"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in child_env().items() if not k.startswith(("SOURCES__", "EVIDENCE__", "DILIGENCE_"))}
    env.update(SOURCES__COMPANY_CONNECTIONS__EMAIL=EMAIL, SOURCES__COMPANY_CONNECTIONS__PASSWORD=PASSWORD,
               SOURCES__COMPANY_CONNECTIONS__TOKEN_STORE_PATH="")
    env.update(extra)
    return env


def _sync(base_url: str, warehouse: Path, **extra: str) -> dict[str, Any]:
    """One ``diligence sync --no-models``: wall time, the sync's own seconds, requests."""
    summary = warehouse.with_suffix(".json")
    log = warehouse.with_suffix(".log").open("ab")
    started = time.perf_counter()
    try:
        code = subprocess.run(
            [DILIGENCE, "sync", "--no-models", "--base-url", base_url, "-w", str(warehouse),
             "--json-summary", str(summary)],
            cwd=warehouse.parent, env=_env(**extra), stdout=log, stderr=subprocess.STDOUT, timeout=1800,
        ).returncode
    finally:
        log.close()
    wall = time.perf_counter() - started
    if code != 0:
        raise RuntimeError(f"diligence sync exited {code}; see {warehouse.with_suffix('.log')}")
    overall = json.loads(summary.read_text())["overall"]
    return {"wall": wall, "sync": overall["duration_seconds"], "requests": overall["requests"]}


def _size(folder: Path) -> dict[str, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return {"bytes": sum(p.stat().st_size for p in files),
            "disk": sum(p.stat().st_blocks * 512 for p in [folder, *folder.rglob("*")]),
            "files": len(files)}


def cost(scale: str, latency_ms: float, repeat: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
    with sandbox(scale, latency_ms=latency_ms, log_dir=WORK_DIR / "evidence") as box, \
            tempfile.TemporaryDirectory(dir=WORK_DIR) as tmp:
        for number in range(repeat):
            order = (("off", {"EVIDENCE__ENABLED": "false"}), ("on", {}))
            for kind, extra in order if number % 2 == 0 else order[::-1]:
                root = Path(tmp) / f"{kind}-{number}"
                root.mkdir()
                runs[kind].append(_sync(box.base_url, root / "w.duckdb", **extra))
            print(f"pair {number + 1}: off {runs['off'][-1]['sync']:.2f} s, on {runs['on'][-1]['sync']:.2f} s "
                  f"({runs['on'][-1]['requests']} requests)", flush=True)
    return {"scale": scale, "latency_ms": latency_ms, "runs": runs}


def growth(scale: str, syncs: int) -> dict[str, Any]:
    sizes: list[dict[str, int]] = []
    with sandbox(scale, log_dir=WORK_DIR / "evidence") as box, tempfile.TemporaryDirectory(dir=WORK_DIR) as tmp:
        warehouse = Path(tmp) / "w.duckdb"
        for number in range(syncs):
            _sync(box.base_url, warehouse)
            sizes.append(_size(warehouse.with_name("w.evidence")))
            print(f"sync {number + 1}: store {sizes[-1]['bytes']:,} bytes", flush=True)
        started = time.perf_counter()
        verified = subprocess.run([DILIGENCE, "verify", "-w", str(warehouse)], cwd=tmp, env=_env(),
                                  capture_output=True, text=True, timeout=1800)
        verify_seconds = time.perf_counter() - started
    return {"scale": scale, "sizes": sizes, "verify_seconds": verify_seconds,
            "verify": (verified.stdout or verified.stderr).strip()}


def render(results: dict[str, Any]) -> str:
    m = results["machine"]
    c, g = results["cost"], results["growth"]
    on, off = c["runs"]["on"], c["runs"]["off"]
    ratio_sync = median([a["sync"] / b["sync"] for a, b in zip(on, off, strict=True)])
    ratio_wall = median([a["wall"] / b["wall"] for a, b in zip(on, off, strict=True)])
    first, last = g["sizes"][0], g["sizes"][-1]
    syncs = len(g["sizes"])
    return "\n".join([
        "## Keeping the evidence (`python -m benchmarks.evidence`)",
        "",
        f"{m['date']} ({m['cores']} cores, load {m['load_average']}). Cost: `diligence sync --no-models` "
        f"on `{c['scale']}` ({on[0]['requests']:,} requests, every answer after {c['latency_ms']:g} ms) "
        f"with the evidence and with `EVIDENCE__ENABLED=false`, {len(on)} pairs alternating; the sync's "
        "own seconds (`--json-summary`). Growth: the store after 1 and after "
        f"{syncs} syncs of the unchanged world. Raw figures: `benchmarks/.work/evidence.json`.",
        "",
        "| figure | before | after | ratio (median of pairs) | goal |",
        "|---|---:|---:|---:|---|",
        f"| sync seconds, evidence off -> on | {median([r['sync'] for r in off]):.2f} | "
        f"{median([r['sync'] for r in on]):.2f} | **{ratio_sync:.3f}** (process wall {ratio_wall:.3f}) | <= 1.05 |",
        f"| store bytes, 1 -> {syncs} syncs | {first['bytes']:,} | {last['bytes']:,} | "
        f"**{last['bytes'] / first['bytes']:.3f}** | <= 1.3 |",
        "",
        f"`diligence verify` of the {syncs} syncs: {g['verify_seconds']:.1f} s, `{g['verify'][:70]}…`.",
    ])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.evidence", description=__doc__.split("\n\n")[1])
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--latency-ms", type=float, default=40.0)
    parser.add_argument("--repeat", type=int, default=5, help="pairs of syncs, evidence on and off")
    parser.add_argument("--syncs", type=int, default=10, help="syncs in a row for the store's growth")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    results = {"cost": cost(args.scale, args.latency_ms, args.repeat), "growth": growth(args.scale, args.syncs)}
    m = machine()
    results["machine"] = {"date": m.date, "cores": m.cores, "load_average": m.load_average}
    publish(results, WORK_DIR / "evidence.json", args.out, PART, render(results))
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
