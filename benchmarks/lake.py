"""``python -m benchmarks.lake [--scale medium] [--latency-ms 50] [--repeat 3] [--before DIR]``

Two measurements of issue 14, printed as Markdown tables and written as JSON to
``benchmarks/.work/lake.json``:

1. **Into a DuckLake with 1 vs 2 workers.** A PostgreSQL 15 catalog (a throwaway
   cluster on 127.0.0.1, as in the tests) and a data path on the local disk; the
   sandbox (``diligence sandbox --scale <scale> --latency-ms <ms>``) in its own process.
   A worker is a queue consumer that runs one ``diligence sync --no-models --namespace X``
   process per namespace, as one Prefect flow run per namespace does on a process
   worker. Figures: wall time until every namespace is in, requests/s (all requests
   over that wall), and each namespace's *fixed cost*: its process's wall minus the
   time its fetch took (interpreter start, ATTACH of the lake, the dlt run). Also one
   process syncing every namespace (``diligence sync --no-models``, no fan-out).
2. **The file warehouse before and after the DuckDB pin.** ``diligence sync`` (with the
   models) of the same sandbox into a new DuckDB file, by this checkout (DuckDB 1.5.5)
   and by ``--before DIR``, a checkout of the commit before the pin with its own venv
   (DuckDB 2.0), runs alternating. Figures: the sync's wall and the model build's time
   as the CLI prints them.

``--fixed-cost --bucket`` measures that fixed cost with the data path on the local disk,
in a bucket (moto in server mode on 127.0.0.1), and with the evidence store in the
bucket too, alternating; written to ``benchmarks/.work/lake_bucket.json``.

``--fixed-cost [--fixed-cost-before DIR]`` measures instead a namespace's fixed cost
alone, written to ``benchmarks/.work/lake_fixed.json``: one namespace of the sandbox
(no added latency unless given) is synced again and again into a lake that already
holds every namespace, by this checkout and by ``DIR`` (a checkout of an earlier commit
with its own venv), alternating, without and with the models. Fixed cost: the
process's wall minus its fetch.

Medians of ``--repeat`` runs. The machine may be shared: the JSON keeps every run.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "benchmarks" / ".work"
EMAIL, PASSWORD = "analyst@example.com", "sandbox-password"
_OK = re.compile(r"^ok\s+(\S+): (\d+) requests, (\d+) rows, \d+ sync issues, ([\d.]+)s", re.M)
_SYNCED = re.compile(r"in ([\d.]+)s")
_MODELS = re.compile(r"models built in ([\d.]+)s")


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOURCES__", "DILIGENCE_"))}
    env.update(SOURCES__COMPANY_CONNECTIONS__EMAIL=EMAIL,
               SOURCES__COMPANY_CONNECTIONS__PASSWORD=PASSWORD,
               SOURCES__COMPANY_CONNECTIONS__TOKEN_STORE_PATH=str(tmp / "token.json"),
               COLUMNS="200")
    return env


def start_sandbox(python: str, scale: str, latency_ms: float, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    from tests.lake.postgres import free_port

    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [python, "-m", "diligence", "sandbox", "--port", str(port), "--scale", scale,
             "--latency-ms", str(latency_ms)], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{base}/_sandbox/truth", timeout=5).raise_for_status()
            return process, base
        except httpx.HTTPError:
            time.sleep(0.5)
    process.kill()
    raise RuntimeError(f"the sandbox did not start: {log.read_text()[-2000:]}")


def run_sync(python: str, cwd: Path, args: list[str], tmp: Path,
             extra_env: dict[str, str] | None = None) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run([python, "-m", "diligence", "sync", *args], cwd=cwd,
                          env={**_env(tmp), **(extra_env or {})},
                          capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"sync failed: {done.stderr[-2000:]}")
    return wall, done.stdout


def lake_run(workers: int, namespaces: list[str], base: str, uri: str, data: Path,
             tmp: Path) -> dict[str, Any]:
    """Every namespace into the lake by `workers` queue consumers (0: one process, all)."""
    options = ["--no-models", "--warehouse", uri, "--data-path", str(data), "--base-url", base]
    python = sys.executable
    if workers == 0:
        wall, out = run_sync(python, tmp, options, tmp)
        found = _OK.findall(out)
        return {"wall": wall, "requests": sum(int(r) for _, r, _, _ in found),
                "per_namespace": []}
    jobs: queue.Queue[str] = queue.Queue()
    for ns in namespaces:
        jobs.put(ns)
    per_namespace: list[dict[str, Any]] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work() -> None:
        while True:
            try:
                ns = jobs.get_nowait()
            except queue.Empty:
                return
            try:
                wall, out = run_sync(python, tmp, [*options, "--namespace", ns], tmp)
                (_, requests, rows, fetch), = _OK.findall(out)
                with lock:
                    per_namespace.append({"namespace": ns, "wall": wall, "requests": int(requests),
                                          "rows": int(rows), "fetch": float(fetch),
                                          "fixed": wall - float(fetch)})
            except BaseException as exc:  # noqa: BLE001 - reported after the join
                errors.append(exc)
                return

    started = time.perf_counter()
    threads = [threading.Thread(target=work) for _ in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    if errors:
        raise errors[0]
    return {"wall": wall, "requests": sum(p["requests"] for p in per_namespace),
            "per_namespace": per_namespace}


def file_run(python: str, cwd: Path, base: str, tmp: Path) -> dict[str, float]:
    warehouse = tmp / "warehouse.duckdb"
    wall, out = run_sync(python, cwd, ["--warehouse", str(warehouse), "--base-url", base], tmp)
    synced = _SYNCED.search(out[: out.find("models built")] if "models built" in out else out)
    models = _MODELS.search(out)
    return {"wall": wall, "sync": float(synced.group(1)) if synced else float("nan"),
            "models": float(models.group(1)) if models else float("nan")}


def _fixed_once(results: dict[str, Any], key: str, run: int,
                sync: tuple[str, Path, list[str], Path, dict[str, str] | None], name: str) -> None:
    """One sync (`sync`: the arguments of :func:`run_sync`); its fixed cost (the wall
    minus the fetch) added to `results` under `key`, written to ``.work/<name>``."""
    wall, out = run_sync(*sync)
    (_, _, _, fetch), = _OK.findall(out)
    results["runs"].setdefault(key, []).append(
        {"wall": wall, "fetch": float(fetch), "fixed": wall - float(fetch)})
    (WORK / name).write_text(json.dumps(results, indent=2))
    print(f"{key} run {run + 1}: {wall - float(fetch):.2f}s", flush=True)


def fixed_cost_run(sides: dict[str, tuple[str, Path]], repeat: int, scale: str,
                   latency_ms: float, root: Path) -> dict[str, Any]:
    """One namespace's fixed cost per side (``--no-models`` and with the models), the
    sides alternating run by run, into one lake that already holds every namespace."""
    from tests.lake.postgres import new_cluster

    results: dict[str, Any] = {"scale": scale, "latency_ms": latency_ms, "runs": {}}
    sandbox, base = start_sandbox(sys.executable, scale, latency_ms, root / "sandbox.log")
    cluster = new_cluster()
    try:
        cluster.start()
        namespaces = httpx.get(f"{base}/_sandbox/truth", timeout=30).json()["namespaces"]
        namespace = namespaces[0]
        results["namespace"] = namespace
        uri = "ducklake:postgres:" + cluster.create_database("fixed_cost")
        lake = ["--warehouse", uri, "--data-path", str(root / "data"), "--base-url", base]
        run_sync(sys.executable, ROOT, lake, root)  # every namespace in, the models built
        for run in range(repeat):
            for side, (python, cwd) in sides.items():
                for models in (False, True):
                    args = [*lake, "--namespace", namespace, *([] if models else ["--no-models"])]
                    _fixed_once(results, f"{side}|{'models' if models else 'no-models'}", run,
                                (python, cwd, args, root, None), "lake_fixed.json")
    finally:
        sandbox.terminate()
        sandbox.wait(timeout=30)
        cluster.stop()
    return results


def bucket_fixed_cost_run(repeat: int, scale: str, latency_ms: float, root: Path) -> dict[str, Any]:
    """One namespace's fixed cost with the lake's data path on the local disk, in a
    bucket (moto on 127.0.0.1, as in the tests), and with the evidence store in the
    bucket too; the three alternating run by run, each into its own lake that already
    holds every namespace."""
    from tests.lake.objectstore import object_store
    from tests.lake.postgres import new_cluster

    results: dict[str, Any] = {"scale": scale, "latency_ms": latency_ms, "runs": {}}
    sandbox, base = start_sandbox(sys.executable, scale, latency_ms, root / "sandbox.log")
    cluster = new_cluster()
    try:
        cluster.start()
        with object_store(root / "moto.log") as store:
            namespace = httpx.get(f"{base}/_sandbox/truth", timeout=30).json()["namespaces"][0]
            results["namespace"] = namespace
            sides: dict[str, tuple[list[str], dict[str, str]]] = {}
            for number, (side, data, evidence) in enumerate((
                    ("local folder", str(root / "data"), None),
                    ("bucket", store.url("lake-1"), str(root / "side-1" / "evidence")),
                    ("bucket, evidence too", store.url("lake-2"), store.url("evidence-2")))):
                uri = "ducklake:postgres:" + cluster.create_database(f"fixed_{number}")
                env = {**store.env(), **({"DILIGENCE_EVIDENCE": evidence} if evidence else {})}
                sides[side] = (["--warehouse", uri, "--data-path", data, "--base-url", base], env)
                run_sync(sys.executable, ROOT, sides[side][0], root / f"side-{number}", env)
            for run in range(repeat):
                for side, (lake, env) in sides.items():
                    for models in (False, True):
                        args = [*lake, "--namespace", namespace, *([] if models else ["--no-models"])]
                        folder = root / f"side-{list(sides).index(side)}"
                        _fixed_once(results, f"{side}|{'models' if models else 'no-models'}", run,
                                    (sys.executable, ROOT, args, folder, env), "lake_bucket.json")
    finally:
        sandbox.terminate()
        sandbox.wait(timeout=30)
        cluster.stop()
    return results


def render_fixed_cost(results: dict[str, Any]) -> str:
    med = statistics.median
    lines = [f"| fixed cost of one namespace's run ({results['scale']}, "
             f"{results['latency_ms']:.0f} ms) | --no-models (s) | with models (s) |",
             "|---|---|---|"]
    sides = dict.fromkeys(key.split("|")[0] for key in results["runs"])
    for side in sides:
        cells = []
        for mode in ("no-models", "models"):
            fixed = [r["fixed"] for r in results["runs"].get(f"{side}|{mode}", [])]
            cells.append(f"{med(fixed):.2f} ({', '.join(f'{f:.2f}' for f in fixed)})"
                         if fixed else "-")
        lines.append(f"| {side} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lake")
    parser.add_argument("--scale", default="medium")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", type=Path, default=None,
                        help="checkout of the commit before the pin, with its .venv")
    parser.add_argument("--skip-lake", action="store_true")
    parser.add_argument("--fixed-cost", action="store_true",
                        help="measure one namespace's fixed cost on the lake instead")
    parser.add_argument("--fixed-cost-before", type=Path, default=None,
                        help="with --fixed-cost: a checkout of an earlier commit, with its .venv")
    parser.add_argument("--bucket", action="store_true",
                        help="with --fixed-cost: the data path on the local disk vs in a bucket "
                             "(moto on 127.0.0.1), the evidence store too")
    parser.add_argument("--render", action="store_true",
                        help="only print the tables of the last run's JSON")
    args = parser.parse_args(argv)
    if args.render:
        if args.fixed_cost:
            name = "lake_bucket.json" if args.bucket else "lake_fixed.json"
            print(render_fixed_cost(json.loads((WORK / name).read_text())))
        else:
            print(render(json.loads((WORK / "lake.json").read_text())))
        return 0
    WORK.mkdir(parents=True, exist_ok=True)
    if args.fixed_cost and args.bucket:
        root = Path(tempfile.mkdtemp(prefix="diligence-bench-lake-bucket-"))
        for number in range(3):
            (root / f"side-{number}").mkdir()
        print(render_fixed_cost(bucket_fixed_cost_run(args.repeat, args.scale, args.latency_ms, root)))
        return 0
    if args.fixed_cost:
        sides = {"this checkout": (sys.executable, ROOT)}
        if args.fixed_cost_before is not None:
            before = args.fixed_cost_before
            sides[f"before ({before.name})"] = (str(before / ".venv" / "bin" / "python"), before)
        root = Path(tempfile.mkdtemp(prefix="diligence-bench-lake-fixed-"))
        fixed = fixed_cost_run(sides, args.repeat, args.scale, args.latency_ms, root)
        print(render_fixed_cost(fixed))
        return 0
    results: dict[str, Any] = {"scale": args.scale, "latency_ms": args.latency_ms,
                               "lake": {}, "file": {}}
    from tests.lake.postgres import new_cluster

    root = Path(tempfile.mkdtemp(prefix="diligence-bench-lake-"))
    sandbox, base = start_sandbox(sys.executable, args.scale, args.latency_ms, root / "sandbox.log")
    cluster = None
    try:
        namespaces = httpx.get(f"{base}/_sandbox/truth", timeout=30).json()["namespaces"]
        results["namespaces"] = len(namespaces)
        if not args.skip_lake:
            cluster = new_cluster()
            cluster.start()
        sides = {"after (1.5.5)": (sys.executable, ROOT)}
        if args.before is not None:
            sides["before (2.0.0)"] = (str(args.before / ".venv" / "bin" / "python"), args.before)
        for run in range(args.repeat):  # lake and file runs alternate, run by run
            for workers in () if args.skip_lake else (1, 2, 0):
                assert cluster is not None
                name = f"lake_{workers}_{run}"
                uri = "ducklake:postgres:" + cluster.create_database(name)
                tmp = root / name
                tmp.mkdir()
                figure = lake_run(workers, namespaces, base, uri, tmp / "data", tmp)
                results["lake"].setdefault(str(workers), []).append(figure)
                (WORK / "lake.json").write_text(json.dumps(results, indent=2))
                print(f"lake workers={workers} run {run + 1}: {figure['wall']:.1f}s", flush=True)
            for side, (python, cwd) in sides.items():
                tmp = root / f"file_{run}_{side.split()[0]}"
                tmp.mkdir()
                figure = file_run(python, cwd, base, tmp)
                results["file"].setdefault(side, []).append(figure)
                (WORK / "lake.json").write_text(json.dumps(results, indent=2))
                print(f"file {side} run {run + 1}: {figure}", flush=True)
    finally:
        sandbox.terminate()
        sandbox.wait(timeout=30)
        if cluster is not None:
            cluster.stop()
    (WORK / "lake.json").write_text(json.dumps(results, indent=2))
    print(render(results))
    return 0


def render(results: dict[str, Any]) -> str:
    med = statistics.median
    lines = [f"| into the lake ({results['scale']}, {results['latency_ms']:.0f} ms, "
             f"{results.get('namespaces')} namespaces) | wall (s) | requests/s | "
             "fixed cost per namespace (s) |", "|---|---|---|---|"]
    labels = {"1": "1 worker", "2": "2 workers", "0": "1 process, all namespaces"}
    for key in ("1", "2", "0"):
        runs = results["lake"].get(key)
        if not runs:
            continue
        walls = [r["wall"] for r in runs]
        rates = [r["requests"] / r["wall"] for r in runs]
        fixed = [p["fixed"] for r in runs for p in r["per_namespace"]]
        lines.append(f"| {labels[key]} | {med(walls):.1f} ({', '.join(f'{w:.1f}' for w in walls)}) "
                     f"| {med(rates):.0f} | {med(fixed):.1f} |" if fixed else
                     f"| {labels[key]} | {med(walls):.1f} ({', '.join(f'{w:.1f}' for w in walls)}) "
                     f"| {med(rates):.0f} | - |")
    lines += ["", "| file warehouse | sync wall (s) | models (s) |", "|---|---|---|"]
    for side, runs in results["file"].items():
        walls = [r["wall"] for r in runs]
        models = [r["models"] for r in runs]
        lines.append(f"| {side} | {med(walls):.1f} ({', '.join(f'{w:.1f}' for w in walls)}) "
                     f"| {med(models):.2f} ({', '.join(f'{m:.2f}' for m in models)}) |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
