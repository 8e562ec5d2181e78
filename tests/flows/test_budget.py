"""One budget per account across workers: Prefect global limits for the rate and for the
requests in flight, each leased in blocks."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from prefect import get_client

import flows.budget as budget_module
from diligence.sync import SyncResult, run_sync
from flows.budget import InflightShare, PrefectRequestBudget, account_budget, limit_name
from sandbox.server import SandboxServer
from tests.helpers import CREDENTIALS, settings_for

pytestmark = pytest.mark.slow


def test_the_limit_is_named_after_the_account_without_showing_it() -> None:
    name = limit_name("https://platform.example.com/", "analyst@example.com")
    assert name == limit_name("https://platform.example.com", "analyst@example.com")
    assert name != limit_name("https://platform.example.com", "other@example.com")
    assert name.startswith("diligence-requests-") and "analyst" not in name
    inflight = limit_name("https://platform.example.com", "analyst@example.com", "inflight")
    assert inflight == name.replace("requests", "inflight")


def _two_workers(server: SandboxServer, tmp_path: Path, budgets: list[PrefectRequestBudget],
                 **options: Any) -> dict[str, SyncResult]:
    """Sync the sandbox's first two namespaces at once, one per thread (a worker each),
    every worker drawing from `account_budget`; returns their results."""
    namespaces = httpx.get(f"{server.base_url}/_sandbox/truth").json()["namespaces"][:2]

    def budget(settings: Any) -> PrefectRequestBudget:
        made = account_budget(settings)
        budgets.append(made)
        return made

    results: dict[str, SyncResult] = {}

    def worker(namespace: str) -> None:
        results[namespace] = run_sync(
            tmp_path / f"{namespace}.duckdb", settings_for(server, namespaces=[namespace], **options),
            budget=budget)

    threads = [threading.Thread(target=worker, args=(ns,)) for ns in namespaces]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    assert all(not result.failed for result in results.values()) and len(results) == 2
    return results


def test_two_workers_of_one_account_share_fifty_requests_a_second(
        prefect_harness: None, tmp_path: Path) -> None:
    """Two workers, one namespace each, against a 50 req/s token bucket, both configured
    with requests_per_second = 50: together they use most of it, with at most 1 % 429s,
    and ask Prefect once per block of requests.

    "Most" is 60 %: a budget that split the rate between the workers, or queued them on
    Prefect, would leave them half of it. What they reach is a speed figure, measured by
    ``python -m benchmarks.budget_cost`` (96 % on a quiet machine); here the suite shares
    two cores with two other test files, and a starved run has reached 76 %."""
    budgets: list[PrefectRequestBudget] = []
    with SandboxServer(scale="medium") as server:
        server.faults.update({"rate_limit": 50})
        started = time.monotonic()
        results = _two_workers(server, tmp_path, budgets, requests_per_second=50)
        lived = time.monotonic() - started  # the longest any in-flight share was open
        stats = httpx.get(f"{server.base_url}/_sandbox/stats").json()
    seconds = max(result.timings["extract"] for result in results.values())  # both fetches
    throttled = stats["injected"].get("rate_limited", 0)
    assert throttled <= 0.01 * stats["total"], (throttled, stats["total"])
    assert stats["total"] / seconds >= 0.6 * 50, (stats["total"], seconds)
    assert len({b.name for b in budgets}) == 1
    for made in budgets:
        assert made.block == 25 and made.leases <= made.requests / 25 + 2
        # in-flight blocks are leased as a block's worth of requests queues for them (the
        # rate's blocks arrive in bursts) and given back once two have lain idle for
        # INFLIGHT_IDLE_SECONDS: beyond the limit's four blocks, every lease follows a
        # give-back, so a starved, bursty run leases more often, yet never per request
        assert made.inflight is not None
        assert made.inflight.leases <= 16 // 4 + lived / budget_module.INFLIGHT_IDLE_SECONDS
        assert made.inflight.leases <= made.requests / 25
    assert stats["in_flight_peak"] <= 16  # max_concurrency's default, for both together
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name(str(budgets[0].name))
        inflight = client.read_global_concurrency_limit_by_name(budgets[0].inflight.name)
    assert limit.slot_decay_per_second == 50 and limit.limit == 50
    assert inflight.limit == 16 and not inflight.slot_decay_per_second
    assert inflight.active_slots == 0  # both runs gave their slots back


def test_two_workers_of_one_account_share_max_concurrency(
        prefect_harness: None, tmp_path: Path) -> None:
    """Two workers, one namespace each, against a service that answers in 20 ms, both
    configured with max_concurrency = 4 and no rate: together they never have more than
    4 requests in flight (apart, each would have 4), lease their slots from Prefect in
    blocks, and give every slot back at their end."""
    budgets: list[PrefectRequestBudget] = []
    with SandboxServer(scale="small") as server:
        server.faults.update({"latency_ms": 20})
        _two_workers(server, tmp_path, budgets, max_concurrency=4)
        stats = httpx.get(f"{server.base_url}/_sandbox/stats").json()
    assert 2 <= stats["in_flight_peak"] <= 4, stats["in_flight_peak"]
    shares = [made.inflight for made in budgets]
    assert all(share is not None and share.block == 1 for share in shares)
    requests = sum(made.requests for made in budgets)
    leases = sum(share.leases for share in shares if share is not None)
    assert leases <= requests / 10, (leases, requests)  # blocks, not a call per request
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name(shares[0].name)  # type: ignore[union-attr]
    assert limit.limit == 4 and limit.active_slots == 0


def test_a_run_queued_behind_the_accounts_other_runs_is_not_a_stall(
        prefect_harness: None, tmp_path: Path) -> None:
    """Another worker of the account holds every in-flight slot for longer than
    stall_timeout: this run waits for it (holding nothing, the service is not stalled),
    then syncs."""
    from prefect.concurrency.sync import concurrency

    with SandboxServer(scale="small") as server:
        name = limit_name(server.base_url, CREDENTIALS["email"], "inflight")
        with get_client(sync_client=True) as client:
            client.upsert_global_concurrency_limit_by_name(name, 2)
        holding, done = threading.Event(), threading.Event()

        def other_worker() -> None:
            with concurrency(name, occupy=2, strict=True):
                holding.set()
                done.wait(timeout=4)

        other = threading.Thread(target=other_worker)
        other.start()
        assert holding.wait(timeout=60)
        threading.Timer(4, done.set).start()
        started = time.monotonic()
        result = run_sync(tmp_path / "w.duckdb", settings_for(server, max_concurrency=2, stall_timeout=1),
                          budget=account_budget)
        seconds = time.monotonic() - started
        other.join(timeout=60)
    assert not result.failed, [outcome.error for outcome in result.failed]
    assert seconds >= 3, seconds  # it waited for the other worker's slots


def _run(coroutine: Callable[[], Any]) -> Any:
    return asyncio.run(coroutine())


def _share(name: str, slots: int, block: int = 2) -> InflightShare:
    """A run's share, in blocks of `block`, of the Prefect limit `name` of `slots` slots."""
    with get_client(sync_client=True) as client:
        client.upsert_global_concurrency_limit_by_name(name, slots)
    return InflightShare(name, block)


def test_a_run_tops_up_by_a_block_and_gives_idle_blocks_back(
        prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-flight slots come in blocks: all busy leases one more, two blocks idle for a
    while give one back, and closing gives the rest back to Prefect."""
    monkeypatch.setattr(budget_module, "INFLIGHT_IDLE_SECONDS", 0.2)
    name = "diligence-inflight-test-blocks"
    share = _share(name, 8)

    async def scenario() -> list[int]:
        held = []
        for _ in range(5):  # 5 requests in flight: 3 blocks of 2
            await share.acquire()
        held.append(share.held)
        for _ in range(5):
            await share.release()
        held.append(share.held)  # kept for a moment: requests come in bursts
        await asyncio.sleep(1.0)  # idle: blocks beyond one are given back, one at a time
        held.append(share.held)
        await share.aclose()
        held.append(share.held)
        return held

    assert _run(scenario) == [6, 6, 2, 0]
    assert share.leases == 3 and share.most_held == 6
    with get_client(sync_client=True) as client:
        assert client.read_global_concurrency_limit_by_name(name).active_slots == 0


def test_a_blocks_worth_of_waiting_requests_leases_the_next_block_at_once(
        prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Requests that find every held slot busy wait a moment for one to free up; once a
    whole block's worth of them waits, the run leases the next block without waiting."""
    monkeypatch.setattr(budget_module, "INFLIGHT_TOPUP_AFTER_SECONDS", 60.0)
    name = "diligence-inflight-test-demand"
    share = _share(name, 8)

    async def scenario() -> list[int]:
        held = []
        for _ in range(2):  # the first block, every slot of it busy
            await share.acquire()
        held.append(share.held)
        async with asyncio.timeout(10):  # not INFLIGHT_TOPUP_AFTER_SECONDS
            await asyncio.gather(share.acquire(), share.acquire())
        held.append(share.held)
        for _ in range(4):
            await share.release()
        await share.aclose()
        return held

    assert _run(scenario) == [2, 4] and share.leases == 2


def test_a_login_or_renewal_holds_no_in_flight_slot(prefect_harness: None) -> None:
    """When every slot of the account is held by requests waiting for a new token, the
    renewal still goes out: it takes its share of the rate, never a slot."""
    name = "diligence-inflight-test-renewal"
    budget = PrefectRequestBudget(None, 1, _share(name, 2))

    async def scenario() -> int:
        async with contextlib.AsyncExitStack() as waiting_for_the_token:
            for _ in range(2):  # every slot of the account
                await waiting_for_the_token.enter_async_context(budget.request())
            async with asyncio.timeout(5), budget.request(slot=False):
                held = budget.inflight.held if budget.inflight else -1
        await budget.aclose()
        return held

    assert _run(scenario) == 2 and budget.requests == 3
    with get_client(sync_client=True) as client:
        assert client.read_global_concurrency_limit_by_name(name).active_slots == 0


def test_a_missing_limit_fails_the_requests_waiting_for_it(prefect_harness: None) -> None:
    share = InflightShare("diligence-inflight-never-created", 2)

    async def scenario() -> None:
        try:
            await share.acquire()
        finally:
            await share.aclose()

    with pytest.raises(Exception, match="must be created|never-created"):
        _run(scenario)


def test_without_requests_per_second_only_requests_in_flight_are_shared(
        prefect_harness: None) -> None:
    class Settings:
        base_url = "https://platform.example.com"
        email = "analyst@example.com"
        requests_per_second = None
        max_concurrency = 8

    budget = account_budget(Settings())  # type: ignore[arg-type]
    assert budget.name is None and budget.inflight is not None
    assert budget.inflight.block == 2
    assert budget.inflight.name == limit_name(Settings.base_url, Settings.email, "inflight")


def test_a_request_cancelled_twice_while_it_waits_leaves_the_slots_usable() -> None:
    """A sync that stops cancels its waiting requests twice (its task group, then the
    stream), while another request holds the share's lock: the wait for a busy slot lets
    go of the lock either way, and the slot given back is taken again. (A flow run whose
    every namespace failed once hung with that lock held and eleven requests waiting for
    it: the timed wait ran in a task of its own, see `InflightShare.acquire`.)"""

    async def scenario() -> None:
        share = InflightShare("diligence-inflight-test", block=1)
        held = asyncio.create_task(asyncio.Event().wait())  # stands for a lease's holder
        share._holders = [(held, asyncio.Event())]  # one slot held
        await share.acquire()  # and busy
        waiting = asyncio.create_task(share.acquire())
        await asyncio.sleep(0)  # waits a moment for the busy slot

        async def briefly_holding_the_lock() -> None:  # as another request's acquire does
            async with share._condition():
                await asyncio.sleep(0.05)

        other = asyncio.create_task(briefly_holding_the_lock())
        await asyncio.sleep(0)
        waiting.cancel()
        await asyncio.sleep(0)
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError, RuntimeError):
            await waiting
        with contextlib.suppress(RuntimeError):
            await other
        await share.release()
        async with asyncio.timeout(5):
            await share.acquire()  # the slot given back is taken again
        held.cancel()

    asyncio.run(scenario())
