"""What drawing requests from the account's shared Prefect budget costs per request.

``python -m benchmarks.budget_cost`` starts a throwaway Prefect API
(``prefect_test_harness``), then measures, side by side in one run:

* one lease: ``rate_limit(name, occupy=block)`` against the API (median of 30);
* handing out requests from leased blocks (:class:`flows.budget.PrefectRequestBudget`),
  with a rate so high that no lease ever waits for slots to decay: the time per request
  that the budget adds, Prefect calls included;

and writes the part ``budget`` of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path

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


def main() -> int:
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        # blocks as leased at 50 and at 200 requests_per_second, from a limit whose
        # slots decay so fast that no lease waits
        rows = [asyncio.run(_measure(1_000_000.0, block)) for block in (25, 100)]
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
        "of a block is used, so the other requests go on meanwhile. Two workers against a "
        "50 req/s token bucket reach at least 90 % of it (`tests/flows/test_budget.py`).")
    text = "\n".join(lines)
    write_part(RESULTS, "budget", text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
