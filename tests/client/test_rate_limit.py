"""429 handling: the adaptive rate in isolation, and against a real rate-limited server."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator

import httpx
import pytest

from pipelines.company_connections.client import ServiceClient
from pipelines.company_connections.limits import AdaptiveThrottle

from .fakes import WEEK, FakeService, make_jwt
from .loopback import LoopbackServer, RateLimitedService

pytestmark = pytest.mark.anyio


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _responses(throttle: AdaptiveThrottle, clock: _Clock, start: float, count: int,
               spacing: float, *, every_429: int = 0, retry_after: float = 1.0) -> None:
    """`count` responses to requests sent `spacing` apart from `start`; every
    `every_429`-th of them a 429."""
    for i in range(count):
        clock.t = start + i * spacing
        throttled = bool(every_429) and (i + 1) % every_429 == 0
        throttle.record(429 if throttled else 200, clock.t, retry_after if throttled else None)


async def test_throttle_slows_to_observed_rate_then_recovers() -> None:
    throttle = AdaptiveThrottle()
    clock = _Clock()
    throttle.now = clock  # type: ignore[method-assign]
    clock.t = 999.0
    await throttle.wait_turn()  # traffic started more than a second before the 429
    _responses(throttle, clock, 1000.0, 50, 0.02)  # 50 accepted during the last second
    clock.t = 1001.0
    throttle.record(429, 1000.99, 2.0)
    assert throttle.ceiling == 49.0  # the one at t=1000.0 is more than a second old
    assert throttle.rate == pytest.approx(49 * 0.9)
    throttle.record(429, 1000.995, 2.0)  # same burst: no second cut
    assert throttle.rate == pytest.approx(49 * 0.9)
    assert throttle._cooldown_until == pytest.approx(1003.0)
    # verified: at the lower rate (sent after the gate reopened) nothing is refused,
    # over enough responses that the share before the cut would have shown 429s
    _responses(throttle, clock, 1003.0, 80, 1 / 44)
    assert throttle._verifying is None and throttle.cuts_undone == 0
    assert throttle.rate == pytest.approx(49 * 0.9)
    clock.t += 1.0  # one clean second after the verification
    throttle._grow()
    assert throttle.rate == pytest.approx(49 * 0.9 * 1.05)
    clock.t += 6
    throttle._grow()
    assert throttle.rate == pytest.approx(49 * 0.97)  # holds below the ceiling
    clock.t += 17  # 20 s at the hold level: probing starts gently
    throttle._grow()
    assert 49 * 0.97 < throttle.rate < 49


async def test_a_steady_429_share_is_shedding_and_the_cut_is_undone() -> None:
    throttle = AdaptiveThrottle()
    clock = _Clock()
    throttle.now = clock  # type: ignore[method-assign]
    await throttle.wait_turn()
    _responses(throttle, clock, 1000.0, 110, 0.01, every_429=11)  # 100 req/s, 1 in 11 refused
    # at the first 429: 10 accepted in 0.1 s, a rate measured over at least 0.5 s
    assert throttle.cuts == 1 and throttle.rate == pytest.approx(10 / 0.5 * 0.9)
    # after the gate: the same share at the lower rate, so slowing down did not help
    _responses(throttle, clock, throttle._cooldown_until, 88, 1 / 80, every_429=11)
    assert throttle.cuts_undone == 1
    assert throttle.rate is None and throttle._limiter is None  # unlimited, as before
    assert throttle.tolerated_share == pytest.approx(1 / 11, abs=0.01)
    # from now on, 429s at that share neither cut the rate nor close the gate
    gate = throttle._cooldown_until
    _responses(throttle, clock, clock.t + 0.01, 550, 0.01, every_429=11)
    assert throttle.cuts == 1 and throttle.rate is None and throttle._cooldown_until == gate
    # a share clearly above it (a real limit on top) is a new cut
    _responses(throttle, clock, clock.t + 0.01, 100, 0.01, every_429=2)
    assert throttle.cuts == 2 and throttle.rate is not None


async def test_a_limit_that_still_refuses_most_requests_is_cut_again() -> None:
    throttle = AdaptiveThrottle()
    clock = _Clock()
    throttle.now = clock  # type: ignore[method-assign]
    await throttle.wait_turn()
    _responses(throttle, clock, 1000.0, 20, 0.01)
    _responses(throttle, clock, 1000.2, 80, 0.01, every_429=3)  # then a third refused
    first = throttle.rate
    assert throttle.cuts == 1
    # after the cut, a quota used up: everything refused, 5 s to the window's end
    _responses(throttle, clock, throttle._cooldown_until, 40, 0.03, every_429=1, retry_after=5)
    assert throttle.cuts == 2 and throttle.cuts_undone == 0
    assert throttle.rate <= first
    assert throttle._cooldown_until > clock.t + 3  # the longest Retry-After seen


async def test_throttle_ceiling_from_a_short_burst_is_only_tentative() -> None:
    throttle = AdaptiveThrottle()
    clock = _Clock()
    throttle.now = clock  # type: ignore[method-assign]
    await throttle.wait_turn()
    _responses(throttle, clock, 1000.0, 10, 0.005)  # a 10-request burst within 50 ms
    throttle.record(429, clock.t, 1.0)
    assert throttle.rate == pytest.approx(10 / 0.5 * 0.9)  # over at least 0.5 s
    _responses(throttle, clock, clock.t + 1.0, 100, 1 / 9)  # verified: no more 429s
    assert throttle._verifying is None
    clock.t += 8
    throttle._grow()  # no hold: growth doubles each clean second
    assert throttle.ceiling is None
    assert throttle.rate > 2 * 18


async def test_throttle_respects_configured_maximum() -> None:
    throttle = AdaptiveThrottle(requests_per_second=10)
    clock = _Clock()
    throttle.now = clock  # type: ignore[method-assign]
    throttle.record(429, clock.t, 0.0)  # too few samples: halve the configured rate
    assert throttle.rate == 5
    _responses(throttle, clock, clock.t, 30, 0.1)  # verified
    clock.t += 100
    throttle._grow()
    assert throttle.rate == 10


async def test_gate_holds_back_new_requests_until_retry_after() -> None:
    throttle = AdaptiveThrottle()
    loop = asyncio.get_running_loop()
    throttle.record(429, loop.time(), 0.3)
    started = loop.time()
    await throttle.wait_turn()
    assert loop.time() - started >= 0.29


class _CountingBudget:
    """A RequestBudget that counts what it hands out and what is held at once."""

    def __init__(self) -> None:
        self.taken = self.held = self.most_held = 0
        self.closed = False

    @contextlib.asynccontextmanager
    async def request(self, *, slot: bool = True) -> AsyncIterator[None]:
        self.taken += 1
        self.held += 1
        self.most_held = max(self.most_held, self.held)
        try:
            yield
        finally:
            self.held -= 1

    def waiting_for(self) -> str:
        return ""

    def queued(self) -> bool:
        return False

    async def aclose(self) -> None:
        self.closed = True


async def test_every_attempt_holds_a_share_of_the_shared_budget() -> None:
    service = FakeService()
    statuses = iter([503] + [200] * 40)
    service.route("GET", "/api/companies/c-1",
                  lambda request: httpx.Response(next(statuses), json={"id": "c-1"}))
    budget = _CountingBudget()
    async with service.client(budget=budget, max_concurrency=4) as client:
        await asyncio.gather(*(client.company("ns", "c-1") for _ in range(20)))
    assert budget.taken == 1 + 20 + 1  # the login, 20 requests and one retry
    assert budget.held == 0 and 1 < budget.most_held <= 4 + 1
    assert budget.closed  # the client gave back what the budget holds


class _SlotBudget(_CountingBudget):
    """A RequestBudget whose in-flight share is `slots` (as a Prefect limit held whole by
    this run): a request that holds a slot waits for a free one."""

    def __init__(self, slots: int) -> None:
        super().__init__()
        self._slots = asyncio.Semaphore(slots)
        self.without_slot = 0

    @contextlib.asynccontextmanager
    async def request(self, *, slot: bool = True) -> AsyncIterator[None]:
        await asyncio.sleep(0)  # a real budget asks Prefect's API first: others go on
        if not slot:
            self.without_slot += 1
            yield
            return
        async with self._slots, super().request():
            yield


async def test_a_renewal_goes_out_while_every_shared_slot_waits_for_it() -> None:
    """Requests that hold every in-flight slot of the account's budget and wait for the
    token's renewal: the renewal takes its share of the rate but holds no slot, or it
    would wait for them as they wait for it (until the stall timeout)."""
    lifetimes = iter([100.0])  # the first token's; then a week
    service = FakeService(token_factory=lambda: make_jwt(lifetime=next(lifetimes, WEEK)))
    service.route("GET", "/api/companies/c-1", json={"id": "c-1"})
    budget = _SlotBudget(4)
    async with service.client(budget=budget, max_concurrency=4) as client:
        await client.company("ns", "c-1")  # logged in
        due = client.tokens.renew_at
        assert due is not None
        client.tokens.clock = lambda: due + 1  # the token is due for renewal, not expired
        async with asyncio.timeout(5):  # without the fix: a deadlock
            await asyncio.gather(*(client.company("ns", "c-1") for _ in range(8)))
    assert service.renew_calls == 1
    assert budget.without_slot == 2  # the login and the renewal
    assert budget.taken == 1 + 8


@pytest.mark.slow
def test_rate_limited_server_is_used_near_its_cap_without_failures() -> None:
    cap, total = 50, 300
    service = RateLimitedService(rate=cap)

    async def run(url: str) -> tuple[float, list[BaseException], ServiceClient]:
        async with ServiceClient(url, email="analyst@example.com", password="pw",
                                 max_concurrency=16) as client:
            started = time.monotonic()
            results = await asyncio.gather(
                *(client.company("ns", f"c-{i}") for i in range(total)), return_exceptions=True)
            elapsed = time.monotonic() - started
        return elapsed, [r for r in results if isinstance(r, BaseException)], client

    with LoopbackServer(service.app) as server:
        elapsed, failures, client = asyncio.run(run(server.url))
    assert failures == []
    achieved = total / elapsed
    assert achieved >= 0.7 * cap, f"{achieved:.1f} req/s"
    assert service.statuses[200] == total + 1  # + the login
    # The 429s of the opening burst and a few probes, not a storm of them. Idle, this
    # takes 12-23 of them. A process starved of CPU (a sixth of a core) takes 7-76: its
    # opening burst stretches, the first estimate of the rate overshoots, and the cut
    # can be judged as shedding and undone once. Without any cut it is about 500.
    assert 1 <= service.statuses[429] <= total // 3
    assert client.stats.throttled == service.statuses[429]
