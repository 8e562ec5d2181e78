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

``--machines [--connections 400] [--latency-ms 200] [--heartbeat 1]``: the resume on
another machine. A lake (a PostgreSQL catalog, its data and the evidence store in a
bucket: moto and a throwaway cluster on 127.0.0.1, as in the tests), every sync run by a
machine of its own (its own folder and HOME: its own copy of the evidence), the
resumed one six heartbeats after the kill, when the killed machine's manifest counts
as gone. Writes the part ``resume-machines`` of ``docs/benchmarks-history.md`` (raw
figures: ``benchmarks/.work/resume_machines.json``).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from diligence.evidence.bucket import MISSED_HEARTBEATS
from diligence.warehouse import lake
from diligence.warehouse.location import WarehouseLocation, parse_location
from pipelines.evidence.manifest import SUFFIX, read_manifest

from .harness import ROOT, WORK_DIR, child_env, machine, median, sandbox
from .results_file import publish

PART = "resume"
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
HISTORY = Path(__file__).resolve().parents[1] / "docs" / "benchmarks-history.md"
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
    """One ``diligence sync --no-models`` into the file `warehouse`: its wall time and the
    requests answered for it."""
    return _process(base_url, ["-w", str(warehouse)], warehouse.parent, _env(**settings),
                    warehouse.with_suffix(".log"), kill_after=kill_after)


def _process(base_url: str, args: list[str], cwd: Path, env: dict[str, str], log_path: Path, *,
             kill_after: int | None = None) -> dict[str, Any]:
    """One ``diligence sync --no-models ARGS`` in `cwd` with `env`, SIGKILLed once the
    service has answered `kill_after` requests: its wall time and the requests answered."""
    _reset(base_url)
    log = log_path.open("ab")
    started = time.perf_counter()
    process = subprocess.Popen([DILIGENCE, "sync", "--no-models", "--base-url", base_url, *args],
                               cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
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
        raise RuntimeError(f"diligence sync exited {code}; see {log_path}")
    return {"seconds": seconds, "requests": _total(base_url), "exit": code}


def _rows(warehouse: Path | WarehouseLocation) -> dict[str, int]:
    """The current rows of every `raw` table of a file warehouse or a lake."""
    location = warehouse if isinstance(warehouse, WarehouseLocation) else parse_location(warehouse)
    con = lake.connect(location, read_only=True)
    try:
        return {t: con.execute(f"select count(*) from raw.{t}"
                               + (" where _dlt_valid_to is null" if t != "questionnaire_templates" else ""))
                .fetchone()[0] for t in TABLES}
    finally:
        con.close()


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


def run_machines(connections: int, latency_ms: float, repeat: int, kill_at: float,
                 heartbeat: float) -> dict[str, Any]:
    """Across machines: a lake (a PostgreSQL catalog, its data and the evidence store in
    a bucket: moto and a throwaway cluster on 127.0.0.1, as in the tests), and each sync
    run by a "machine" of its own (its own working folder and HOME, so its own copy of
    the evidence). Per repetition: a full sync into one lake; a sync into another
    SIGKILLed at `kill_at` of the full one's requests; once six heartbeats have passed,
    a sync of that lake on a third machine."""
    from tests.lake.objectstore import object_store
    from tests.lake.postgres import new_cluster

    runs: list[dict[str, Any]] = []
    cluster = new_cluster()
    with sandbox("small", latency_ms=latency_ms, extra=["--connections", str(connections)],
                 log_dir=WORK_DIR / "resume") as box, \
            tempfile.TemporaryDirectory(dir=WORK_DIR) as tmp, object_store(Path(tmp) / "moto.log") as store:
        os.environ.update(store.env())  # this process reads the lakes' rows
        cluster.start()
        try:
            for number in range(repeat):
                root = Path(tmp) / str(number)

                def machine(name: str, target: WarehouseLocation, evidence: str) -> tuple[Path, dict[str, str]]:
                    work, home = root / name / "work", root / name / "home"  # noqa: B023 - this repetition's
                    work.mkdir(parents=True)
                    home.mkdir()
                    env = {k: v for k, v in _env().items() if not k.startswith(("DILIGENCE_", "XDG_", "EVIDENCE__"))}
                    env.update(store.env(), HOME=str(home), DILIGENCE_WAREHOUSE=target.uri,
                               DILIGENCE_DATA_PATH=str(target.data_path), DILIGENCE_EVIDENCE=evidence,
                               EVIDENCE__HEARTBEAT_SECONDS=f"{heartbeat:g}")
                    return work, env

                def sync(name: str, target: WarehouseLocation, evidence: str, **kill: int) -> dict[str, Any]:
                    work, env = machine(name, target, evidence)
                    return _process(box.base_url, [], work, env, work / "sync.log", **kill)

                lakes = {side: (parse_location("ducklake:postgres:" + cluster.create_database(f"{side}_{number}"),
                                               store.url(f"{number}/{side}/lake")),
                                store.url(f"{number}/{side}/evidence")) for side in ("full", "resumed")}
                full = sync("full", *lakes["full"])
                killed = sync("killed", *lakes["resumed"], kill_after=int(kill_at * full["requests"]))
                killed["recorded"] = _recorded(root / "killed" / "home")
                time.sleep(MISSED_HEARTBEATS * heartbeat + 1)  # the killed machine's manifest is taken for gone
                resumed = sync("resumed", *lakes["resumed"])
                resumed["kept"] = kept_answers((root / "resumed" / "work" / "sync.log").read_text(errors="replace"))
                exact = _rows(lakes["resumed"][0]) == _rows(lakes["full"][0])
                runs.append({"full": full, "killed": killed, "resumed": resumed, "exact": exact})
                print(f"run {number + 1}: full {full['seconds']:.1f} s / {full['requests']} requests; killed at "
                      f"{killed['requests']} ({killed['recorded']} in its manifest); resumed on another machine "
                      f"{resumed['seconds']:.1f} s / {resumed['requests']} requests, {resumed['kept']} kept; "
                      f"{'exact' if exact else 'ROWS DIFFER'}", flush=True)
        finally:
            cluster.stop()
    return {"connections": connections, "latency_ms": latency_ms, "kill_at": kill_at,
            "heartbeat": heartbeat, "machines": True, "runs": runs}


#: the resumed sync's summary line of a namespace: "resumed: N of M requests kept"
_KEPT = re.compile(r"resumed: ([\d,]+) of [\d,]+ requests kept")


def kept_answers(output: str) -> int:
    """The answers a resumed sync kept, from its namespaces' lines in its `output`."""
    return sum(int(kept.replace(",", "")) for kept in _KEPT.findall(output))


def _recorded(home: Path) -> int:
    """The entries of the one manifest a killed machine left in its copy of the evidence."""
    (path,) = home.glob(f".cache/diligence/evidence-*/syncs/*{SUFFIX}")
    manifest = read_manifest(path)
    return 0 if manifest is None else len(manifest.entries)


def render(results: dict[str, Any]) -> str:
    m = machine()
    runs = results["runs"]

    def med(kind: str, key: str) -> float:
        return median([r[kind][key] for r in runs])

    share_requests = median([r["resumed"]["requests"] / r["full"]["requests"] for r in runs])
    share_seconds = median([r["resumed"]["seconds"] / r["full"]["seconds"] for r in runs])
    killed_share = median([r["killed"]["requests"] / r["full"]["requests"] for r in runs])
    exact = all(r["exact"] for r in runs)
    if results.get("machines"):
        title, command = "## Resuming on another machine", (
            f"`python -m benchmarks.resume --machines --connections {results['connections']} --latency-ms "
            f"{results['latency_ms']:g} --heartbeat {results['heartbeat']:g} --repeat {len(runs)} "
            f"--kill-at {results['kill_at']:g}`")
        setting = (f"A `small` sandbox listing {results['connections']} connections, {results['latency_ms']:g} ms "
                   "per answer; a lake (a PostgreSQL catalog, its data and the evidence store in a bucket: "
                   "moto on 127.0.0.1) and `diligence sync --no-models` run by a machine of its own each (its "
                   "own folder and HOME, so its own copy of the evidence): into a new lake, then into another "
                   f"one SIGKILLed once {killed_share:.0%} of a full sync's requests were answered, then, six "
                   f"heartbeats ({results['heartbeat']:g} s) later, on a third machine.")
        goal = (f"Goal: at most 60 % of a full sync's requests. At the kill the killed machine's manifest "
                f"held {median([r['killed']['recorded'] for r in runs]):,.0f} answers (medians); the resumed "
                f"sync found {median([r['resumed']['kept'] for r in runs]):,.0f} of them in the bucket and kept "
                "them.")
    else:
        title, command = "## Resuming an interrupted sync", (
            f"`python -m benchmarks.resume --scale {results['scale']} --rate-limit {results['rate_limit']:g} "
            f"--repeat {len(runs)} --kill-at {results['kill_at']:g}`")
        setting = (f"A `{results['scale']}` sandbox whose token bucket allows {results['rate_limit']:g} "
                   "requests/s; `diligence sync --no-models` (one process each) into a new warehouse, then "
                   f"into another one SIGKILLed once {killed_share:.0%} of a full sync's requests were "
                   "answered, then again on that one.")
        goal = "Goal: at most 55 % of a full sync's requests and time."
    lines = [
        title,
        "",
        f"{command} on {m.date} ({m.cores} cores, load average {m.load_average}; raw figures: "
        f"`benchmarks/.work/{_raw_name(results)}`). {setting} Medians of {len(runs)} runs, side by side on one "
        "sandbox.",
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
        f"(current rows of every `raw` table). {goal}",
    ]
    return "\n".join(lines)


def _raw_name(results: dict[str, Any]) -> str:
    return "resume_machines.json" if results.get("machines") else "resume.json"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.resume", description=__doc__.split("\n\n")[1])
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--rate-limit", type=float, default=50.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kill-at", type=float, default=0.5)
    parser.add_argument("--machines", action="store_true",
                        help="resume on another machine: a lake in a bucket, a machine per sync")
    parser.add_argument("--connections", type=int, default=400, help="with --machines: the sandbox's connections")
    parser.add_argument("--latency-ms", type=float, default=200.0, help="with --machines: per answer")
    parser.add_argument("--heartbeat", type=float, default=1.0,
                        help="with --machines: [evidence] heartbeat_seconds of every sync")
    parser.add_argument("--out", type=Path, default=None,
                        help="default: RESULTS.md, with --machines docs/benchmarks-history.md")
    args = parser.parse_args(argv)
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    if args.machines:
        results = run_machines(args.connections, args.latency_ms, args.repeat, args.kill_at, args.heartbeat)
        out, part = args.out or HISTORY, PART + "-machines"
    else:
        results = run(args.scale, args.rate_limit, args.repeat, args.kill_at)
        out, part = args.out or RESULTS, PART
    publish(results, WORK_DIR / _raw_name(results), out, part, render(results))
    return 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
