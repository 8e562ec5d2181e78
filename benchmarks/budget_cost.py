"""What drawing requests from the account's shared Prefect budget costs per request.

``python -m benchmarks.budget_cost`` starts a throwaway Prefect API
(``prefect_test_harness``), then measures, side by side in one run:

* one lease: ``rate_limit(name, occupy=block)`` against the API (median of 30);
* handing out requests from leased blocks (:class:`flows.budget.PrefectRequestBudget`),
  with a rate so high that no lease ever waits for slots to decay: the time per request
  that the budget adds, Prefect calls included;
* one in-flight block: leasing it and giving it back (``concurrency(name, occupy=4)``,
  median of 30), and requests taking and giving back slots of a held block;
* two workers of one account syncing a namespace each, side by side: the rate alone
  shared, then the rate and the requests in flight (against a 50 req/s token bucket),
  and against a service answering in 20 ms with ``max_concurrency = 4``: throughput,
  429s, the most requests in flight at the service, Prefect calls per request;

and writes the part ``budget`` of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .harness import machine
from .results_file import write_part

RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
REQUESTS = 20_000


async def _measure(rate: float, block: int) -> dict[str, float]:
    from prefect import get_client
    from prefect.concurrency.asyncio import rate_limit

    from flows.budget import PrefectRequestBudget, _capacity

    name = f"bench-budget-{block}"
    async with get_client() as client:
        await client.upsert_global_concurrency_limit_by_name(name, _capacity(rate, block),
                                                             slot_decay_per_second=rate)
    leases = []
    for _ in range(30):
        started = time.perf_counter()
        await rate_limit(name, occupy=1, strict=True)
        leases.append(time.perf_counter() - started)
    budget = PrefectRequestBudget(name, block)
    started = time.perf_counter()
    for _ in range(REQUESTS):
        async with budget.request():
            pass
    per_request = (time.perf_counter() - started) / REQUESTS
    return {"rate": rate, "block": block, "lease_ms": 1000 * statistics.median(leases),
            "per_request_us": 1e6 * per_request, "calls_per_request": budget.leases / REQUESTS}


async def _measure_inflight(block: int) -> dict[str, float]:
    from prefect import get_client
    from prefect.concurrency.asyncio import concurrency

    from flows.budget import InflightShare

    name = f"bench-inflight-{block}"
    async with get_client() as client:
        await client.upsert_global_concurrency_limit_by_name(name, 4 * block)
    leases = []
    for _ in range(30):
        started = time.perf_counter()
        async with concurrency(name, occupy=block, strict=True):
            pass
        leases.append(time.perf_counter() - started)
    share = InflightShare(name, block)
    started = time.perf_counter()
    for _ in range(REQUESTS):
        await share.acquire()
        await share.release()
    per_request = (time.perf_counter() - started) / REQUESTS
    await share.aclose()
    return {"block": block, "lease_ms": 1000 * statistics.median(leases),
            "per_request_us": 1e6 * per_request, "leases": share.leases}


def _two_workers(inflight: bool, faults: dict[str, Any], options: dict[str, Any],
                 scale: str) -> dict[str, float]:
    """Two workers (threads), one namespace each, of one account against one sandbox."""
    import httpx

    from diligence.sync import SyncResult, run_sync, source_settings
    from flows.budget import PrefectRequestBudget, account_budget
    from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer

    budgets: list[PrefectRequestBudget] = []

    def budget(settings: Any) -> PrefectRequestBudget:
        made = account_budget(settings)
        if not inflight:
            made.inflight = None
        budgets.append(made)
        return made

    with SandboxServer(scale=scale) as server, tempfile.TemporaryDirectory() as tmp:
        namespaces = httpx.get(f"{server.base_url}/_sandbox/truth").json()["namespaces"][:2]
        server.faults.update(faults)
        results: dict[str, SyncResult] = {}

        def worker(namespace: str) -> None:
            settings = source_settings(base_url=server.base_url, namespaces=[namespace], email=DEFAULT_EMAIL,
                                       password=DEFAULT_PASSWORD, token_store_path=None, **options)
            results[namespace] = run_sync(Path(tmp) / f"{namespace}.duckdb", settings, budget=budget)

        threads = [threading.Thread(target=worker, args=(ns,)) for ns in namespaces]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        stats = httpx.get(f"{server.base_url}/_sandbox/stats").json()
    if any(result.failed for result in results.values()):
        raise RuntimeError(f"a worker failed: {[r.failed for r in results.values()]}")
    seconds = max(result.timings["extract"] for result in results.values())
    calls = sum(b.leases + (b.inflight.leases if b.inflight else 0) for b in budgets)
    return {"rate": stats["total"] / seconds, "throttled": stats["injected"].get("rate_limited", 0),
            "total": stats["total"], "peak": stats["in_flight_peak"],
            "calls_per_request": calls / stats["total"]}


def main() -> int:
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        # blocks as leased at 50 and at 200 requests_per_second, from a limit whose
        # slots decay so fast that no lease waits
        rows = [asyncio.run(_measure(1_000_000.0, block)) for block in (25, 100)]
        inflight = asyncio.run(_measure_inflight(4))
        shared: list[tuple[str, bool, dict[str, float]]] = []
        for label, faults, options, scale in (
                ("50 req/s token bucket, `requests_per_second = 50`", {"rate_limit": 50},
                 {"requests_per_second": 50}, "medium"),
                ("20 ms answers, `max_concurrency = 4`", {"latency_ms": 20},
                 {"max_concurrency": 4}, "small")):
            for with_inflight in (False, True):
                shared.append((label, with_inflight,
                               _two_workers(with_inflight, faults, options, scale)))
    lines = [
        "## Sharing an account's budget across workers (`python -m benchmarks.budget_cost`)",
        "",
        f"A local Prefect API (SQLite), {machine().cpu}, {machine().date}. A run leases "
        "`requests_per_second x 0.5 s` requests per Prefect call (`flows/budget.py`); the rate "
        "here decays so fast that no lease waits, so what is left is the cost.",
        "",
        "| one lease (Prefect API call, median of 30) | block | Prefect calls per request | "
        "time added per request (Prefect calls included) |",
        "|---|---|---|---|",
    ]
    for row in rows:
        lines.append(f"| {row['lease_ms']:.1f} ms | {row['block']} | "
                     f"{row['calls_per_request']:.5f} | {row['per_request_us']:.1f} µs |")
    lines.append("")
    lines.append(
        f"One Prefect call serves a block; per request that is {rows[0]['lease_ms'] / 25:.2f} ms "
        "of API time at 25 requests a block when the event loop is idle. Within a busy loop a "
        "lease takes Prefect's client longer (the time added per request above, measured with "
        "requests handed out back to back); the lease for the next block is taken when half "
        "of a block is used, so the other requests go on meanwhile. What two workers reach "
        "of a 50 req/s token bucket is in the next table; `tests/flows/test_budget.py` checks "
        "at least 60 % on a busy machine.")
    lines += [
        "",
        "In-flight slots (`diligence-inflight-…`, `max_concurrency` slots) are leased in "
        "blocks of a quarter of `max_concurrency` and held while used: leasing a block of "
        f"4 and giving it back takes {inflight['lease_ms']:.1f} ms (median of 30); "
        f"{REQUESTS:,} requests taking and giving back a slot of a held block add "
        f"{inflight['per_request_us']:.1f} µs each, with {inflight['leases']:.0f} Prefect "
        "lease in all.",
        "",
        "Two workers of one account, one namespace each, side by side (the rate shared "
        "wherever `requests_per_second` is set; `max_concurrency = 4` bounds the two "
        "together when in-flight slots are shared, each on its own when not):",
        "",
        "| service | in flight shared | requests/s (both) | 429s | most in flight at the "
        "service | Prefect calls per request |",
        "|---|---|---|---|---|---|",
    ]
    for label, with_inflight, row in shared:
        lines.append(f"| {label} | {'yes' if with_inflight else 'no'} | "
                     f"{row['rate']:.1f} | {row['throttled']:.0f} of {row['total']:.0f} | "
                     f"{row['peak']:.0f} | {row['calls_per_request']:.4f} |")
    text = "\n".join(lines)
    write_part(RESULTS, "budget", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
