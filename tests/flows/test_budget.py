"""One rate budget per account across workers: a Prefect global rate limit, leased in blocks."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from prefect import get_client

from diligence.sync import SyncResult, run_sync
from flows.budget import PrefectRequestBudget, account_budget, limit_name
from sandbox.server import SandboxServer
from tests.helpers import CREDENTIALS

pytestmark = pytest.mark.slow


def test_the_limit_is_named_after_the_account_without_showing_it() -> None:
    name = limit_name("https://platform.example.com/", "analyst@example.com")
    assert name == limit_name("https://platform.example.com", "analyst@example.com")
    assert name != limit_name("https://platform.example.com", "other@example.com")
    assert name.startswith("diligence-requests-") and "analyst" not in name


def test_two_workers_of_one_account_share_fifty_requests_a_second(
        prefect_harness: None, tmp_path: Path) -> None:
    """Two workers, one namespace each, against a 50 req/s token bucket, both configured
    with requests_per_second = 50: together they use at least 90 % of it, with at most
    1 % 429s, and ask Prefect once per block of requests."""
    budgets: list[PrefectRequestBudget] = []

    def budget(settings: Any) -> PrefectRequestBudget | None:
        made = account_budget(settings)
        assert made is not None
        budgets.append(made)
        return made

    with SandboxServer(scale="medium") as server:
        namespaces = httpx.get(f"{server.base_url}/_sandbox/truth").json()["namespaces"][:2]
        server.faults.update({"rate_limit": 50})
        results: dict[str, SyncResult] = {}

        def worker(namespace: str) -> None:
            results[namespace] = run_sync(
                tmp_path / f"{namespace}.duckdb", base_url=server.base_url,
                namespaces=[namespace], budget=budget,
                source_options={**CREDENTIALS, "token_store_path": None,
                                "requests_per_second": 50})

        threads = [threading.Thread(target=worker, args=(ns,)) for ns in namespaces]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=180)
        stats = httpx.get(f"{server.base_url}/_sandbox/stats").json()
    assert all(not result.failed for result in results.values()) and len(results) == 2
    seconds = max(result.timings["extract"] for result in results.values())  # both fetches
    throttled = stats["injected"].get("rate_limited", 0)
    assert throttled <= 0.01 * stats["total"], (throttled, stats["total"])
    assert stats["total"] / seconds >= 0.9 * 50, (stats["total"], seconds)
    assert len({b.name for b in budgets}) == 1
    for made in budgets:
        assert made.block == 25 and made.leases <= made.requests / 25 + 2
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name(budgets[0].name)
    assert limit.slot_decay_per_second == 50 and limit.limit == 50


def test_without_requests_per_second_nothing_is_shared() -> None:
    class Settings:
        requests_per_second = None

    assert account_budget(Settings()) is None  # type: ignore[arg-type]
