"""What the model build costs as history grows, and how the warehouse file grows.

``python -m benchmarks.growth [--before DIR] [--repeat 3] [--syncs 5 200 1000]
[--small-syncs 60] [--parts synthetic small]``

`DIR` is a copy of the code to compare with (e.g. ``git archive 9eac389 | tar -x -C
/tmp/before``); both trees run with this venv's interpreter, each with its own tree first
on ``PYTHONPATH``, one after the other within every repetition (the order alternates),
so both see the same machine load. Without it only this tree is measured.

1. **synthetic**: the synthetic `large` world (``tests.models.synthetic``: 11,500
   questionnaires of 30 fields, 3 namespaces) with N syncs of history (``--syncs``) and
   2 % churn: every sync after the second gives a new version, with one revised answer,
   to 2 % of the questionnaires. Per tree the world is built once (``diligence models``,
   the first build; this tree builds it twice, so that its history tables have their
   spares, see ``diligence.analytics.incremental``); then, per repetition, a copy of that warehouse gets the next daily
   sync (``append_sync``, 2 % churn) and ``diligence models`` builds it, as the CLI does
   after a daily sync. Figures per build: the process's wall seconds and peak RSS
   (``ru_maxrss`` from ``os.wait4``), dbt's own seconds (``run_results.json``), the
   history marts' seconds, and whether the CLI built twice (a failed build first). This
   tree also builds the same copy with ``--full-refresh``.
2. **small**: the sandbox's `small` world synced ``--small-syncs`` times into one
   warehouse per tree, as a daily user does (``diligence sync --no-models``, then
   ``models``, ``status``, ``changes``, ``verify``), with changes between syncs through
   the sandbox's admin routes (answers every sync, a document's expiry every third, a
   connection's reading rights every seventh, a template field every twentieth, a new
   document every tenth). The warehouse as the 2nd and the last sync left it is kept;
   at the end the four commands run on fresh copies of both, alternating, ``--repeat``
   times (medians and ratios). Also the warehouse file's and the analysts' copy's bytes
   and free blocks, the raw rows and their size after each sync: file bytes per added
   raw row against the raw data's, both fitted per sync from the 10th on (the first
   syncs add fixed costs: the history marts' spares, a rebuild's free blocks), and how
   many model runs compacted the file (``diligence.warehouse.compact``).

Writes the part ``growth`` of ``benchmarks/RESULTS.md`` (raw figures:
``benchmarks/.work/growth.json``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import shutil
import sys
import time
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import httpx

from .harness import (
    EMAIL,
    PASSWORD,
    ROOT,
    WORK_DIR,
    child_env,
    machine,
    median,
    run_process,
    sandbox,
)
from .results_file import publish

PART = "growth"
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
WORK = WORK_DIR / "growth"
CHURN = 0.02
#: the history marts whose seconds are reported (dbt's execution_time of each node)
HISTORY_MODELS = ("answer_history", "answer_changes", "document_history", "connection_history",
                  "changes", "stg_access_ends")
TIMEOUT = 3600


def _env(tree: Path) -> dict[str, str]:
    env = {k: v for k, v in child_env().items() if not k.startswith(("SOURCES__", "EVIDENCE__", "DILIGENCE_"))}
    env.update(PYTHONPATH=str(tree), SOURCES__COMPANY_CONNECTIONS__EMAIL=EMAIL,
               SOURCES__COMPANY_CONNECTIONS__PASSWORD=PASSWORD,
               SOURCES__COMPANY_CONNECTIONS__TOKEN_STORE_PATH="")
    return env


def _diligence(tree: Path, args: list[str], log: Path) -> dict[str, Any]:
    """One ``diligence`` process of `tree`: exit code, wall seconds, peak RSS in MB."""
    run = run_process([sys.executable, "-m", "diligence", *args], cwd=tree, env=_env(tree),
                      log=log, timeout=TIMEOUT)
    output = "\n".join(line for _at, line in run.lines)
    if run.exit_code != 0:
        raise RuntimeError(f"diligence {args[0]} of {tree} exited {run.exit_code}; see {log}:\n{output[-3000:]}")
    return {"wall": run.wall_seconds, "peak_mb": run.peak_rss_mb, "built_twice": "building them again" in output,
            "compacted": "compacted the warehouse" in output}


def _models(tree: Path, warehouse: Path, as_of: str, *extra: str) -> dict[str, Any]:
    """``diligence models`` on `warehouse` with `tree`'s code, and dbt's own figures."""
    log = warehouse.with_suffix(".log")
    figures = _diligence(tree, ["models", "-w", str(warehouse), "--as-of", as_of, "--publish", *extra], log)
    figures["built_twice"] = "building them again" in log.read_text(errors="replace")
    results = json.loads((warehouse.with_name(warehouse.stem + ".dbt") / "run_results.json").read_text())
    figures["dbt"] = results["elapsed_time"]
    nodes = {r["unique_id"].split(".")[-1]: r["execution_time"] for r in results["results"]
             if r["unique_id"].startswith("model.")}
    figures["models"] = {name: nodes.get(name) for name in HISTORY_MODELS}
    figures["tests"] = sum(r["execution_time"] for r in results["results"] if r["unique_id"].startswith("test."))
    return figures


def _remove(warehouse: Path) -> None:
    """The warehouse and what lives beside it: WAL, log, analysts' copy, evidence, dbt."""
    stem = warehouse.stem
    for path in [*warehouse.parent.glob(stem + ".*"), *warehouse.parent.glob(stem + "-analytics.*")]:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _copy(warehouse: Path, to: Path) -> None:
    """The warehouse and its analysts' copy, as they were (times kept: the copy is
    recognised as the one its warehouse published)."""
    shutil.copy2(warehouse, to)
    published = warehouse.with_name(warehouse.stem + "-analytics.duckdb")
    if published.exists():
        shutil.copy2(published, to.with_name(to.stem + "-analytics.duckdb"))


def _in_child(function: Any, *args: Any) -> None:
    """Run `function(*args)` in a fresh interpreter. The worlds are made there, not here:
    a process started from this one begins with this one's peak RSS as its own (Linux
    carries it over fork and exec), so this one stays small for the builds' figures."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        pool.apply(function, args)


def synthetic(trees: dict[str, Path], syncs: Sequence[int], repeat: int, full_refresh: bool = True
              ) -> dict[str, Any]:
    from tests.models.rawdb import SYNCED_AT
    from tests.models.synthetic import PROFILES, append_sync, generate_raw

    profile = PROFILES["large"]
    as_of = (SYNCED_AT + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M:%S")
    results: dict[str, Any] = {}
    for count in syncs:
        WORK.mkdir(parents=True, exist_ok=True)
        world = WORK / f"world-{count}.duckdb"
        _remove(world)
        started = time.perf_counter()
        _in_child(generate_raw, world, profile.questionnaires, profile.fields_per_questionnaire,
                  profile.namespaces, profile.company_types, count, CHURN)
        with duckdb.connect(str(world), read_only=True) as con:
            versions = con.execute("select count(*) from raw.questionnaires").fetchone()[0]  # type: ignore[index]
        entry: dict[str, Any] = {"generated_seconds": time.perf_counter() - started,
                                 "questionnaire_versions": versions, "first": {}, "runs": {}}
        print(f"{count} syncs: world generated ({versions:,} questionnaire versions)", flush=True)
        warm: dict[str, Path] = {}
        for name, tree in trees.items():
            warm[name] = WORK / f"{name}-{count}.duckdb"
            _remove(warm[name])
            shutil.copyfile(world, warm[name])
            entry["first"][name] = _models(tree, warm[name], as_of)
            if name == "after":  # the second build keeps the first's tables as its spares
                entry["second"] = _models(tree, warm[name], as_of)
            print(f"  {name}: first build {entry['first'][name]['wall']:.1f} s", flush=True)
        kinds: list[tuple[str, tuple[str, ...]]] = [(name, ()) for name in trees]
        for number in range(repeat):
            order = kinds if number % 2 == 0 else kinds[::-1]
            if full_refresh:
                order = [*order, ("after_full_refresh", ("--full-refresh",))]
            for kind, extra in order:
                tree_name = "after" if kind == "after_full_refresh" else kind
                run = WORK / f"run-{kind}.duckdb"
                _remove(run)
                _copy(warm[tree_name], run)
                _in_child(append_sync, run, CHURN)
                figures = _models(trees[tree_name], run, as_of, *extra)
                figures["bytes"] = run.stat().st_size
                entry["runs"].setdefault(kind, []).append(figures)
                print(f"  {kind} #{number + 1}: {figures['wall']:.1f} s, dbt {figures['dbt']:.1f} s, "
                      f"{figures['peak_mb']:.0f} MB{' (built twice)' if figures['built_twice'] else ''}",
                      flush=True)
                _remove(run)
        for path in [world, *warm.values()]:
            _remove(path)
        results[str(count)] = entry
    return results


def _post(box: Any, route: str, body: dict[str, Any]) -> None:
    httpx.post(f"{box.base_url}/_sandbox/{route}", json=body, timeout=60).raise_for_status()


def _change_world(box: Any, number: int, items: dict[str, list[Any]]) -> None:
    """The changes made before sync `number` (2, 3, ...): deterministic, small, of every kind."""
    answers = items["answers"]
    for offset in range(5):
        company_id, type_id, field_id = answers[(number * 5 + offset) * 7 % len(answers)]
        _post(box, "answers", {"company_id": company_id, "company_type_id": type_id, "field_id": field_id,
                               "information": {"value": f"revised at sync {number}"}})
    if number % 3 == 0:
        document_id = items["documents"][number % len(items["documents"])][0]
        _post(box, "documents", {"document_id": document_id,
                                 "set": {"expirationDate": f"2027-{number % 12 + 1:02d}-01T00:00:00"}})
    if number % 7 == 0:  # one connection's rights withdrawn, given back seven syncs later
        withdrawn = number % 14 == 7
        connections = items["connections"]
        namespace, company_id, received = connections[(number // 14 - (0 if withdrawn else 1)) % len(connections)]
        _post(box, "connections", {"namespace": namespace, "company_id": company_id,
                                   "received": received[:-1] if withdrawn else received})
    if number % 10 == 0:
        company_id, type_id = items["documents"][(number * 3) % len(items["documents"])][1:]
        _post(box, "documents", {"add": {"company_id": company_id, "company_type_id": type_id}})
    if number % 20 == 0:
        _post(box, "templates", {"company_type_id": items["types"][0], "add_field": {
            "id": f"bench-field-{number}", "type": "Input", "label": f"Added at sync {number}"}})


def _items(published: Path) -> dict[str, list[Any]]:
    """What the changes pick from: answered Input fields, documents, connections, types."""
    with duckdb.connect(str(published), read_only=True) as con:
        return {
            "answers": con.execute(
                "select company_id, company_type_id, field_id from analytics.answers "
                "where field_type = 'Input' and not is_own_company order by all").fetchall(),
            "documents": con.execute(
                "select document_id, company_id, company_type_id from analytics.document_expiry "
                "where not is_own_company order by all").fetchall(),
            "connections": [(ns, c, list(r)) for ns, c, r in con.execute(
                "select namespace_company_id, company_id, received_company_type_ids "
                "from analytics.connections where len(received_company_type_ids) > 1 order by all").fetchall()],
            "types": [r[0] for r in con.execute(
                "select distinct company_type_id from analytics.answers order by 1").fetchall()],
        }


def _file_figures(warehouse: Path) -> dict[str, Any]:
    with duckdb.connect(str(warehouse), read_only=True) as con:
        tables = [r[0] for r in con.execute(
            "select table_name from duckdb_tables() where schema_name = 'raw'").fetchall()]
        rows = sum(con.execute(f'select count(*) from raw."{t}"').fetchone()[0] for t in tables)  # type: ignore[index]
        raw_bytes = _raw_bytes(con, tables)
        size = con.execute("pragma database_size").fetchone()
        names = [d[0] for d in con.description]  # type: ignore[union-attr]
        blocks = dict(zip(names, size, strict=True))  # type: ignore[arg-type]
    published = warehouse.with_name(warehouse.stem + "-analytics.duckdb")
    return {"bytes": warehouse.stat().st_size, "raw_rows": rows, "raw_bytes": raw_bytes, "free_blocks": blocks["free_blocks"],
            "used_blocks": blocks["used_blocks"], "published_bytes": published.stat().st_size}


#: the commands timed on the 2nd and the last sync's warehouse, side by side
COMMANDS = ("models", "status", "changes", "verify")


def _daily(tree: Path, warehouse: Path, as_of: str) -> dict[str, Any]:
    """What a user runs after a sync, on `warehouse` with `tree`'s code: ``models``,
    ``status``, ``changes``, ``verify`` (which keeps its checkpoint); wall seconds each."""
    log = warehouse.with_suffix(".log")
    figures = {"models": _models(tree, warehouse, as_of)}
    for command in COMMANDS[1:]:
        figures[command] = _diligence(tree, [command, "-w", str(warehouse)], log)
    return figures


def small(trees: dict[str, Path], syncs: int, repeat: int) -> dict[str, Any]:
    from tests.models.rawdb import AS_OF

    as_of = AS_OF.strftime("%Y-%m-%dT%H:%M:%S")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    root = WORK / "small"
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    kept = {2: "second", syncs: "last"}
    with sandbox("small", log_dir=WORK) as box:
        items: dict[str, list[Any]] = {}
        for number in range(1, syncs + 1):
            if number > 1:
                _change_world(box, number, items)
            names = list(trees) if number % 2 else list(trees)[::-1]
            for name in names:
                warehouse = root / name / "w.duckdb"
                warehouse.parent.mkdir(exist_ok=True)
                sync = _diligence(trees[name], ["sync", "--no-models", "--base-url", box.base_url,
                                                "-w", str(warehouse)], warehouse.with_suffix(".log"))
                if number in kept:  # as the sync left it, before its models
                    shutil.copytree(warehouse.parent, root / f"{name}-{kept[number]}", symlinks=True)
                daily = _daily(trees[name], warehouse, as_of)
                figures = {**daily["models"], **_file_figures(warehouse), "sync": sync["wall"],
                           **{f"{c}_wall": daily[c]["wall"] for c in COMMANDS[1:]}}
                runs[name].append(figures)
                if not items:
                    items = _items(warehouse.with_name("w-analytics.duckdb"))
            print(f"sync {number}: " + ", ".join(
                f"{n} models {runs[n][-1]['wall']:.1f} s, {runs[n][-1]['bytes'] / 1e6:.1f} MB" for n in names),
                flush=True)
    side = _side_by_side(trees, root, as_of, repeat)
    shutil.rmtree(root, ignore_errors=True)
    return {"syncs": syncs, "runs": runs, "side_by_side": side}


def _side_by_side(trees: dict[str, Path], root: Path, as_of: str, repeat: int) -> dict[str, Any]:
    """The commands after the 2nd sync and after the last, each on a fresh copy of the
    warehouse as that sync left it, alternating, `repeat` times: wall seconds per tree,
    sync (second, last) and command."""
    timed: dict[str, dict[str, dict[str, list[float]]]] = {
        name: {which: {c: [] for c in COMMANDS} for which in ("second", "last")} for name in trees}
    for number in range(repeat):
        for name in trees:
            for which in ("second", "last") if number % 2 == 0 else ("last", "second"):
                scratch = root / "scratch"
                shutil.rmtree(scratch, ignore_errors=True)
                shutil.copytree(root / f"{name}-{which}", scratch, symlinks=True)
                daily = _daily(trees[name], scratch / "w.duckdb", as_of)
                for command in COMMANDS:
                    timed[name][which][command].append(daily[command]["wall"])
                print(f"  {name} after the {which} sync #{number + 1}: " + ", ".join(
                    f"{c} {daily[c]['wall']:.1f} s" for c in COMMANDS), flush=True)
    return timed


def _raw_bytes(con: duckdb.DuckDBPyConnection, tables: list[str]) -> int:
    """The raw rows' own size: their values as JSON text, in bytes."""
    return sum(con.execute(f'select coalesce(sum(strlen(to_json(t)::varchar)), 0) from raw."{name}" t'
                           ).fetchone()[0] for name in tables)  # type: ignore[index]


def _fit(points: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares line through `points`: (intercept, slope)."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0
    return mean_y - slope * mean_x, slope


#: the sync from which the file's growth is fitted (the first syncs add the history
#: marts' spares and the free blocks a rebuild leaves: a fixed cost, not growth)
STEADY_FROM = 10


def _steady_growth(runs: list[dict[str, Any]]) -> str:
    """The file's and the raw data's growth per sync, fitted from :data:`STEADY_FROM` on."""
    steady = list(enumerate(runs, start=1))[STEADY_FROM - 1:]
    if len(steady) < 3:
        return "-"
    file_slope = _fit([(float(n), float(r["bytes"])) for n, r in steady])[1]
    data_slope = _fit([(float(n), float(r.get("raw_bytes", 0))) for n, r in steady])[1]
    return f"{file_slope / 1e3:,.0f} KB / {data_slope / 1e3:,.0f} KB"


def render(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = ["## Cost as history grows (`python -m benchmarks.growth`)", "",
             f"{m['cpu']}, {m['date']}, load {m['load_before']} before and {m['load_average']} after; "
             f"medians of {results['repeat']}, the trees alternating in every repetition. "
             "Raw figures: `benchmarks/.work/growth.json`."]
    synthetic_results = results.get("synthetic")
    if synthetic_results:
        lines += ["", "Synthetic `large` (11,500 questionnaires x 30 fields, 3 namespaces), N syncs of history "
                  "with 2 % churn, then the next daily sync and `diligence models` (the whole process; "
                  "dbt: its `run_results.json`; peak: the process's `ru_maxrss`):", "",
                  "| syncs | build | process | dbt build | peak | `answer_history` | `answer_changes` | "
                  "`document_history` | `changes` | built twice |",
                  "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        fits: dict[str, list[tuple[float, float]]] = {}
        for count, entry in synthetic_results.items():
            for kind, runs in entry["runs"].items():
                wall = median([r["wall"] for r in runs])
                fits.setdefault(kind, []).append((float(count), wall))
                marts = [median([r["models"][name] or 0.0 for r in runs]) for name in
                         ("answer_history", "answer_changes", "document_history", "changes")]
                lines.append(
                    f"| {int(count):,} | {kind.replace('_', ' ')} | {wall:.1f} s | "
                    f"{median([r['dbt'] for r in runs]):.1f} s | {median([r['peak_mb'] for r in runs]):,.0f} MB | "
                    + " | ".join(f"{s:.2f} s" for s in marts)
                    + f" | {sum(r['built_twice'] for r in runs)} of {len(runs)} |")
        lines += ["", "Fitted cost per sync of history (least squares over the N above) and projections:", "",
                  "| build | fixed | per sync | at 365 syncs | at 1,000 syncs |", "|---|---:|---:|---:|---:|"]
        for kind, points in fits.items():
            intercept, slope = _fit(points)
            lines.append(f"| {kind.replace('_', ' ')} | {intercept:.1f} s | {slope * 1000:.1f} ms | "
                         f"{intercept + 365 * slope:.1f} s | {intercept + 1000 * slope:.1f} s |")
        if "after" in fits and len(fits["after"]) > 1:
            first, last = fits["after"][0], fits["after"][-1]
            lines += ["", f"Incremental build at {int(last[0]):,} syncs / at {int(first[0]):,}: "
                      f"**{last[1] / first[1]:.2f}x** (goal <= 1.5x)."]
    small_results = results.get("small")
    if small_results:
        count = small_results["syncs"]
        side = small_results.get("side_by_side") or {}
        lines += ["", f"The sandbox's `small` world, {count} syncs with changes between them; after each, "
                  "`diligence sync --no-models`, then `models`, `status`, `changes`, `verify` (a daily user). "
                  f"The commands after the 2nd and after the {count}th sync, each on a fresh copy of the warehouse "
                  f"as that sync left it, side by side (medians of {results['repeat']}):", "",
                  f"| tree | command | after the 2nd sync | after the {count}th | ratio |", "|---|---|---:|---:|---:|"]
        for name, timed in side.items():
            for command in COMMANDS:
                second, last = median(timed["second"][command]), median(timed["last"][command])
                lines.append(f"| {name} | `{command}` | {second:.2f} s | {last:.2f} s | {last / second:.2f}x |")
        lines += ["", "The warehouse file as it grows (raw data: the raw rows' values as JSON text):", "",
                  f"| tree | file, 2nd -> {count}th | raw rows added | file bytes per added raw row | "
                  "raw data bytes per added raw row | file growth / raw data growth | free blocks at the end | "
                  f"fitted growth per sync from the {STEADY_FROM}th, file / raw data | compactions | "
                  "analysts' copy, 2nd -> last |", "|---|---|---:|---:|---:|---:|---:|---|---:|---|"]
        for name, runs in small_results["runs"].items():
            second, last = runs[1], runs[-1]
            added = max(1, last["raw_rows"] - second["raw_rows"])
            grown = last["bytes"] - second["bytes"]
            data = last.get("raw_bytes", 0) - second.get("raw_bytes", 0)
            lines.append(
                f"| {name} | {second['bytes'] / 1e6:.1f} -> {last['bytes'] / 1e6:.1f} MB | {added:,} | "
                f"{grown / added:,.0f} | {data / added:,.0f} | {grown / data if data > 0 else float('nan'):.1f}x | "
                f"{last['free_blocks']:,} of {last['free_blocks'] + last['used_blocks']:,} | "
                f"{_steady_growth(runs)} | {sum(bool(r.get('compacted')) for r in runs)} | "
                f"{second['published_bytes'] / 1e6:.1f} -> {last['published_bytes'] / 1e6:.1f} MB |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.growth", description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, help="a copy of the code to compare with")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--syncs", type=int, nargs="+", default=[5, 200, 1000])
    parser.add_argument("--small-syncs", type=int, default=60)
    parser.add_argument("--parts", nargs="+", choices=("synthetic", "small"), default=["synthetic", "small"])
    parser.add_argument("--no-full-refresh", dest="full_refresh", action="store_false",
                        help="leave out this tree's build with --full-refresh")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    trees = {"before": args.before.resolve()} if args.before else {}
    trees["after"] = ROOT
    load_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    raw = WORK_DIR / "growth.json"
    previous = json.loads(raw.read_text()) if raw.exists() else {}
    # a part not run this time keeps its last figures
    results: dict[str, Any] = {k: previous[k] for k in ("synthetic", "small") if k in previous}
    results["repeat"] = args.repeat
    if "synthetic" in args.parts:
        results["synthetic"] = synthetic(trees, args.syncs, args.repeat, args.full_refresh)
    if "small" in args.parts:
        results["small"] = small(trees, args.small_syncs, args.repeat)
    m = machine()
    results["machine"] = {"cpu": m.cpu, "date": m.date, "load_average": m.load_average, "load_before": load_before}
    publish(results, raw, args.out, PART, render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
