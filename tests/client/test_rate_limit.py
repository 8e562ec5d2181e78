"""429 handling: the adaptive rate in isolation, and against a real rate-limited server."""

from __future__ import annotations

import asyncio
import time

import pytest

from pipelines.company_connections.client import ServiceClient
from pipelines.company_connections.limits import AdaptiveThrottle

from .loopback import LoopbackServer, RateLimitedService

pytestmark = pytest.mark.anyio


class _Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


async def test_throttle_slows_to_observed_rate_then_recovers() -> None:
    throttle = AdaptiveThrottle()
    clock = _Clock()
    throttle.now = clock  # type: ignore[method-assign]
    clock.t = 999.0
    await throttle.wait_turn()  # traffic started more than a second before the 429
    for i in range(50):  # 50 accepted during the last second
        clock.t = 1000.0 + i * 0.02
        throttle.record(200, clock.t, None)
    clock.t = 1001.0
    throttle.record(429, 1000.99, 2.0)
    assert throttle.ceiling == 49.0  # the one at t=1000.0 is more than a second old
    assert throttle.rate == pytest.approx(49 * 0.9)
    throttle.record(429, 1000.995, 2.0)  # same burst: no second cut
    assert throttle.rate == pytest.approx(49 * 0.9)
    assert throttle._cooldown_until == pytest.approx(1003.0)
    clock.t = 1004.0  # one clean second after the cool-down
    throttle._grow()
    assert throttle.rate == pytest.approx(49 * 0.9 * 1.05)
    clock.t = 1010.0
    throttle._grow()
    assert throttle.rate == pytest.approx(49 * 0.97)  # holds below the ceiling
    clock.t = 1027.0  # 20 s at the hold level: probing starts gently
    throttle._grow()
    assert 49 * 0.97 < throttle.rate < 49


async def test_throttle_ceiling_from_a_short_burst_is_only_tentative() -> None:
    throttle = AdaptiveThrottle()
    clock = _Clock()
    throttle.now = clock  # type: ignore[method-assign]
    await throttle.wait_turn()
    for i in range(10):  # a 10-request burst within 50 ms, then a 429
        clock.t = 1000.0 + i * 0.005
        throttle.record(200, clock.t, None)
    throttle.record(429, clock.t, 1.0)
    assert throttle.rate == pytest.approx(9.0)
    clock.t += 1.0 + 8
    throttle._grow()  # no hold: growth doubles each clean second
    assert throttle.ceiling is None
    assert throttle.rate > 20


async def test_throttle_respects_configured_maximum() -> None:
    throttle = AdaptiveThrottle(requests_per_second=10)
    clock = _Clock()
    throttle.now = clock  # type: ignore[method-assign]
    throttle.record(429, clock.t, 0.0)  # too few samples: halve the configured rate
    assert throttle.rate == 5
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
    # the 429s of the opening burst and a few probes, not a storm of them
    assert 1 <= service.statuses[429] <= 40
    assert client.stats.throttled == service.statuses[429]
