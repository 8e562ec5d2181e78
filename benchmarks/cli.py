"""What users wait for: the whole ``diligence sync`` process beside a bare replay of its GETs.

``python -m benchmarks.cli [--repeat 3] [--connections 400 2000] [--memory 200 2000]``

For each size, a sandbox of its own (``python -m sandbox --connections N --latency-ms L``,
its own process on 127.0.0.1, data as deterministic as the scales') serves, in each
repetition and one after the other:

* a **bare replay** of the same GETs: login, then every URL of a sync known up front,
  ``--concurrency`` requests in flight, bodies read and dropped
  (:mod:`benchmarks.ceiling`: 16 threads sharing one ``httpx.Client`` by default, or
  its async client); its time runs from the login to the last body, without its start-up;
* ``diligence sync --no-models`` and the whole ``diligence sync`` (models, checks, the
  analysts' copy), each a process of the console script timed from exec to exit (wall,
  CPU and peak RSS from ``os.wait4``), into a new warehouse, as a user runs it
  (the venv's bytecode, credentials from the environment);
* at the first size, ``diligence sync --no-models`` with ``EVIDENCE__ENABLED=false``.

The contenders run A B C D in even repetitions and D C B A in odd ones, so that a
drifting load weighs on each alike; every ratio is taken within a repetition and the
figure is the median of those ratios. The sizes of ``--memory`` take the peak RSS of the
whole sync (a size not measured otherwise runs the whole sync alone).

With ``--before DIR`` (e.g. ``git archive <commit> | tar -x -C DIR``) each sync of the
code in DIR runs too, in the same repetitions, with DIR first on the path: a change's
before and after from one run. ``--contenders`` keeps a subset.

Writes the part ``cli`` of ``benchmarks/RESULTS.md`` (the goals of the latest run, every
paired ratio) and of ``docs/benchmarks-history.md`` (every contender's times and phases),
and adds this commit's line to the part ``cli-history`` of RESULTS.md (one line per
commit; a run on uncommitted changes to the code is not recorded there). A run not of the
standard settings (every contender, at least 3 repetitions, the default sizes, latency
and concurrency) writes its tables to ``RESULTS.md`` in its work folder instead, unless
``--out`` names a file. Raw figures: ``benchmarks/.work/cli/cli.json``; ``--render``
writes the parts again from them.
"""

from __future__ import annotations

import argparse
import compileall
import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .cli_report import BEFORE, HISTORY_PART, PART, history_line, record_history, render, standard
from .harness import (
    EMAIL,
    PASSWORD,
    ROOT,
    WORK_DIR,
    BenchError,
    Sandbox,
    machine,
    run_child,
    run_process,
    sandbox,
)
from .results_file import publish, write_part

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
DETAILS = ROOT / "docs" / "benchmarks-history.md"
DILIGENCE = str(Path(sys.executable).with_name("diligence"))
#: what a change to these paths changes the figures of (a dirty tree is not recorded)
CODE_PATHS = ("diligence", "pipelines", "sandbox", "sql", "pyproject.toml", "uv.lock")

__all__ = ["Contender", "CONTENDERS", "main", "measure"]


@dataclass(frozen=True)
class Contender:
    """One process of a repetition: the replay, or ``diligence sync`` with these options."""

    name: str
    label: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    @property
    def is_replay(self) -> bool:
        return self.name == "replay"


CONTENDERS: dict[str, Contender] = {c.name: c for c in (
    Contender("replay", "bare replay of the same GETs"),
    Contender("no_models", "`diligence sync --no-models`", ("--no-models",)),
    Contender("whole", "`diligence sync`"),
    Contender("no_evidence", "`diligence sync --no-models`, `EVIDENCE__ENABLED=false`",
              ("--no-models",), {"EVIDENCE__ENABLED": "false"}),
)}


def user_env(**extra: str) -> dict[str, str]:
    """The environment of ``diligence sync``: this one without our settings or a bytecode
    prefix (so the venv's own bytecode is used, as a user's run uses it), plus the
    sandbox's credentials."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SOURCES__", "EVIDENCE__", "DILIGENCE_", "PYTHONPYCACHEPREFIX"))}
    env.update(PYTHONUNBUFFERED="1",  # each line as it is written: the phases' clock
               SOURCES__COMPANY_CONNECTIONS__EMAIL=EMAIL,
               SOURCES__COMPANY_CONNECTIONS__PASSWORD=PASSWORD,
               SOURCES__COMPANY_CONNECTIONS__TOKEN_STORE_PATH="")
    env.update(extra)
    return env


def sync_run(box: Sandbox, contender: Contender, folder: Path, *, concurrency: int,
             timeout: float) -> dict[str, Any]:
    """One ``diligence sync`` process into a new warehouse in `folder`: its wall, CPU and
    peak RSS, the sandbox's count of what it served, and the phases of its JSON summary."""
    warehouse = folder / "warehouse"  # deleted after the run; its log and summary stay
    warehouse.mkdir(parents=True)
    summary = folder / "summary.json"
    cmd = [DILIGENCE, "sync", "--base-url", box.base_url, "-w", str(warehouse / "w.duckdb"),
           "--max-concurrency", str(concurrency), "--json-summary", str(summary), *contender.args]
    box.reset_stats()
    sandbox_cpu = box.cpu_seconds() or 0.0
    run = run_process(cmd, cwd=folder, env=user_env(**contender.env), log=folder / "sync.log",
                      timeout=timeout)
    sandbox_cpu = (box.cpu_seconds() or 0.0) - sandbox_cpu
    shutil.rmtree(warehouse)
    if run.exit_code != 0 or not summary.exists():
        tail = "\n".join((folder / "sync.log").read_text(errors="replace").splitlines()[-20:])
        raise BenchError(f"diligence sync ({contender.name}) exited {run.exit_code}:\n{tail}")
    overall = json.loads(summary.read_text())
    models = overall.get("models") or {}
    return {"wall": run.wall_seconds, "cpu": run.cpu_seconds, "user": run.user_seconds,
            "system": run.system_seconds, "peak": run.peak_rss_mb,
            "requests": overall["overall"]["requests"], "served": box.stats()["total"],
            "sandbox_cpu": sandbox_cpu, "sync": overall["overall"]["duration_seconds"],
            "extract": overall["overall"]["extract_seconds"],
            "load": overall["overall"]["load_seconds"], "models": models.get("seconds", 0.0),
            **phases(run.lines, run.wall_seconds)}


def phases(lines: list[tuple[float, str]], wall: float) -> dict[str, float]:
    """What the user waits for, from when `diligence sync`'s lines appeared: the start-up
    (to its first progress line, once user-info has answered and the first namespace's
    requests are planned), the fetch and loads (to the last ``namespace ... loaded``
    line), the seal (to ``synced N/N``), the models, checks and analysts' copy (to
    ``models built``), and the exit (after the last line)."""
    def first(test: Any) -> float:
        return next((at for at, line in lines if test(line)), float("nan"))

    started = first(lambda line: " requests, " in line and "namespace " in line)
    loaded = max((at for at, line in lines if " loaded: " in line), default=float("nan"))
    synced = first(lambda line: line.startswith("synced "))
    built = first(lambda line: line.startswith("models built in "))
    last = lines[-1][0] if lines else float("nan")
    return {"startup": started, "fetch_loads": loaded - started, "seal": synced - loaded,
            "tail_models": 0.0 if math.isnan(built) else built - synced, "exit": wall - last}


def replay_run(box: Sandbox, *, concurrency: int, client: str, timeout: float,
               log_dir: Path) -> dict[str, Any]:
    """The bare replay in a child process: its time from the login to the last body."""
    box.reset_stats()
    sandbox_cpu = box.cpu_seconds() or 0.0
    child = run_child({"kind": "ceiling", "label": "cli-replay", "base_url": box.base_url,
                       "concurrency": concurrency, "client": client},
                      timeout=timeout, log_dir=log_dir)
    sandbox_cpu = (box.cpu_seconds() or 0.0) - sandbox_cpu
    timings = child.result["timings"]
    return {"wall": timings["fetch"], "cpu": timings["cpu_fetch"], "peak": child.peak_rss_mb,
            "requests": child.result["requests"], "served": box.stats()["total"],
            "sandbox_cpu": sandbox_cpu, "process": child.wall_seconds,
            "statuses": child.result["statuses"]}


def plan(connections: Sequence[int], memory: Sequence[int], only: Sequence[str] | None = None,
         before: bool = False) -> dict[int, list[str]]:
    """The contenders of each size: every measured size has the replay and both syncs,
    the first the evidence-off sync too; a memory-only size the whole sync. `only` keeps
    those contenders; `before` adds each sync of the code before (``<name>@before``)."""
    sizes: dict[int, list[str]] = {}
    for index, size in enumerate(connections):
        sizes[size] = ["replay", "no_models", "whole"] + (["no_evidence"] if index == 0 else [])
    for size in memory:
        sizes.setdefault(size, ["whole"])
    for size, names in sizes.items():
        names = [name for name in names if only is None or name in only]
        sizes[size] = [variant for name in names for variant in
                       ([name, name + BEFORE] if before and name != "replay" else [name])]
    return {size: names for size, names in sorted(sizes.items()) if names}


def contender(name: str, before: Path | None) -> Contender:
    """The contender `name`; one of the code before (``<name>@before``) runs with that
    tree first on the path."""
    base = CONTENDERS[name.removesuffix(BEFORE)]
    if not name.endswith(BEFORE):
        return base
    assert before is not None
    return Contender(name, base.label, base.args, {**base.env, "PYTHONPATH": str(before)})


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """Run every size's repetitions; the raw figures (size -> contender -> runs)."""
    figures: dict[str, dict[str, list[dict[str, Any]]]] = {}
    load: dict[str, str] = {"start": machine().load_average}
    for size, names in plan(args.connections, args.memory, args.contenders, args.before is not None).items():
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
        with sandbox(args.scale, latency_ms=args.latency_ms, log_dir=args.work_dir / "logs",
                     extra=["--connections", str(size)]) as box:
            expected = box.truth()["expected_requests"]
            for rep in range(args.repeat):
                order = names if rep % 2 == 0 else names[::-1]
                for name in order:
                    who = contender(name, args.before)
                    if who.is_replay:
                        run = replay_run(box, concurrency=args.concurrency, client=args.replay,
                                         timeout=args.timeout, log_dir=args.work_dir / "logs")
                    else:
                        folder = args.work_dir / "runs" / f"{size}-{rep}-{name}-{time.time_ns()}"
                        run = sync_run(box, who, folder, concurrency=args.concurrency,
                                       timeout=args.timeout)
                    runs[name].append({**run, "expected": expected})
                    print(f"{size} connections, run {rep + 1}, {name}: {run['wall']:.2f} s, "
                          f"{run['cpu']:.2f} CPU s, {run['peak']:.0f} MB, {run['served']} served",
                          flush=True)
        figures[str(size)] = runs
        load[f"after {size}"] = machine().load_average
    return {"figures": figures, "load": load}


def warm_up(args: argparse.Namespace) -> None:
    """One untimed whole sync (of each tree) and replay on the smallest size: the page
    cache, dbt's partial parse in the checkout, the replay's bytecode."""
    size = min([*args.connections, *args.memory])
    with sandbox(args.scale, log_dir=args.work_dir / "logs", extra=["--connections", str(size)]) as box:
        for name in ["whole"] + (["whole" + BEFORE] if args.before is not None else []):
            sync_run(box, contender(name, args.before), args.work_dir / "runs" / f"warm-up-{time.time_ns()}",
                     concurrency=args.concurrency, timeout=args.timeout)
        replay_run(box, concurrency=args.concurrency, client=args.replay, timeout=args.timeout,
                   log_dir=args.work_dir / "logs")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.cli",
                                     description=__doc__.split("\n\n")[1])
    parser.add_argument("--repeat", type=int, default=3, help="repetitions (medians of them)")
    parser.add_argument("--connections", type=int, nargs="+", default=[400, 2000],
                        help="sizes measured against the replay (connections of all namespaces)")
    parser.add_argument("--memory", type=int, nargs=2, default=[200, 2000], metavar=("FROM", "TO"),
                        help="the sizes whose whole syncs' peak RSS are compared")
    parser.add_argument("--latency-ms", type=float, default=40.0,
                        help="the sandbox's latency on every API answer")
    parser.add_argument("--scale", default="small",
                        help="the sandbox's scale, whose namespaces list the connections")
    parser.add_argument("--concurrency", type=int, default=16,
                        help="requests in flight, of the sync and of the replay")
    parser.add_argument("--replay", choices=("threads", "async"), default="threads",
                        help="the replay's client: threads sharing an httpx.Client, or its AsyncClient")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per process")
    parser.add_argument("--contenders", type=lambda text: text.split(","), default=None,
                        help=f"only these, comma-separated ({', '.join(CONTENDERS)})")
    parser.add_argument("--before", type=Path, default=None, metavar="DIR",
                        help="also time the syncs of the code in DIR (e.g. `git archive <commit> | "
                             "tar -x -C DIR`), with DIR first on the path, in the same repetitions")
    parser.add_argument("--no-warm-up", dest="warm_up", action="store_false")
    parser.add_argument("--out", type=Path, default=RESULTS,
                        help="Markdown file of the goals and the history (default benchmarks/RESULTS.md)")
    parser.add_argument("--details", type=Path, default=None,
                        help="Markdown file of every contender's figures (default: "
                             "docs/benchmarks-history.md for the default --out, else <out>-details.md)")
    parser.add_argument("--render", type=Path, default=None, metavar="RAW_JSON",
                        help="measure nothing: write the parts again from an earlier run's cli.json")
    parser.add_argument("--work-dir", type=Path, default=WORK_DIR / "cli",
                        help="warehouses, logs and the raw figures (cli.json)")
    parser.add_argument("--no-record", dest="record", action="store_false",
                        help="do not add this commit's line to the history")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render is not None:  # the figures of an earlier run, written again
        raw = json.loads(args.render.read_text())
    else:
        raw = run(args)
    if args.out == RESULTS and not standard(raw):
        # a run of other settings (a subset, fewer repetitions) does not take the place of
        # the last standard run's goals: its tables go beside its raw figures
        args.out = args.work_dir / "RESULTS.md"
        print(f"not the standard settings: the tables go to {args.out}, not to {RESULTS}")
    if args.details is None:
        args.details = (DETAILS if args.out == RESULTS else args.out.with_name(f"{args.out.stem}-details.md"))
    headline, details = render(raw, args.out, args.details)
    write_part(args.details, PART, details)
    if args.render is None:
        publish(raw, args.work_dir / "cli.json", args.out, PART, headline)
    else:
        write_part(args.out, PART, headline)
    print(f"wrote {args.out} and {args.details}")
    if not standard(raw):
        print(f"not for the part {HISTORY_PART}: not its settings (every contender, at least 3 "
              "repetitions, the default sizes, latency and concurrency)")
        return 0
    line = history_line(raw)
    print(line)
    if not args.record:
        return 0
    if not raw["commit"]["clean"]:
        print(f"not recorded in the part {HISTORY_PART}: uncommitted changes under "
              f"{', '.join(CODE_PATHS)}")
    else:
        record_history(args.out, line, raw["commit"]["hash"])
    return 0


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Warm up, measure, and describe the run: its raw figures."""
    args.work_dir = args.work_dir.resolve()  # each sync runs in a folder of its own
    args.work_dir.mkdir(parents=True, exist_ok=True)
    if args.before is not None:
        args.before = args.before.resolve()
        compileall.compile_dir(args.before, quiet=1)  # its bytecode, as `make install` makes ours
    started = time.perf_counter()
    if args.warm_up:
        warm_up(args)
    raw = measure(args)
    m = machine()
    raw["settings"] = {"repeat": args.repeat, "connections": args.connections,
                       "memory": args.memory, "latency_ms": args.latency_ms, "scale": args.scale,
                       "concurrency": args.concurrency, "replay": args.replay,
                       "contenders": args.contenders,
                       "before": _label(args.before) if args.before is not None else None}
    raw["machine"] = {"cpu": m.cpu, "cores": m.cores, "date": m.date}
    raw["minutes"] = (time.perf_counter() - started) / 60
    raw["commit"] = _commit()
    return raw


def _label(tree: Path) -> str:
    """What a tree of the code before is: its folder, and its commit when it is a checkout."""
    commit = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip()
    return f"`{tree.name}`" + (f", {commit}" if commit else "")


def _commit() -> dict[str, Any]:
    """This tree's commit, and whether the code that makes the figures is committed."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=False).stdout.strip()

    return {"hash": git("rev-parse", "--short", "HEAD"),
            "clean": not git("status", "--porcelain", "--", *CODE_PATHS)}


if __name__ == "__main__":
    sys.exit(main())
