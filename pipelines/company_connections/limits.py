"""Request-rate limits of the client: a rate cap that slows everyone down after a 429.

`AdaptiveThrottle` makes every request wait for any 429 cool-down (the longest
Retry-After seen) and for an `aiolimiter.AsyncLimiter` rate, which starts at the
configured `requests_per_second` (None: unlimited). After a 429 the rate drops to
0.9 x the requests accepted over the last second, then climbs back while no 429 comes.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque

from aiolimiter import AsyncLimiter

from . import settings as s

__all__ = ["AdaptiveThrottle"]

logger = logging.getLogger("diligence.client")


class _Limiter(AsyncLimiter):
    """An `AsyncLimiter` whose rate can change without losing its waiters. Its
    bucket holds ``RATE_BURST_SECONDS`` worth of requests (at least one), enough to
    absorb event-loop wake-up delays without allowing real bursts."""

    def __init__(self, rate: float) -> None:
        burst = max(1.0, rate * s.RATE_BURST_SECONDS)
        super().__init__(burst, burst / rate)

    def set_rate(self, rate: float) -> None:
        burst = max(1.0, rate * s.RATE_BURST_SECONDS)
        self.max_rate, self.time_period, self._rate_per_sec = burst, burst / rate, rate


class AdaptiveThrottle:
    """Shared pacing of all requests to the service: a 429 cool-down gate and an
    adaptive rate limit.

    A 429 closes the gate until its ``Retry-After`` deadline (1 s without one): no
    request is sent before then. The first 429 of a burst (one sent after the last
    slow-down) also lowers the rate to 0.9 x the requests the service accepted over
    the last second, and remembers that count as the ceiling; with fewer than 5
    accepted (too few to estimate a rate) it halves an existing limit instead, or
    relies on the gate alone when there is none.

    Each clean second (no 429) the rate grows 5 % up to 97 % of the ceiling and
    holds there for 20 s; then it probes upwards, 1 % in the first second, doubling
    each further clean second up to 25 %. Once 10 % above the ceiling the ceiling is
    forgotten; without a ceiling growth starts at 5 % and doubles the same way. The
    rate never exceeds `requests_per_second` when given.
    """

    def __init__(self, requests_per_second: float | None = None) -> None:
        self.max_rate = requests_per_second
        self.rate: float | None = requests_per_second
        self.ceiling: float | None = None
        self._limiter = _Limiter(requests_per_second) if requests_per_second else None
        self._cooldown_until = 0.0
        self._last_decrease = float("-inf")
        self._clean_since: float | None = None
        self._held_seconds = self._probe_steps = 0
        self._hold_for = s.RATE_PROBE_AFTER_SECONDS
        self._active_since = float("inf")
        self._gate_failed_before = False
        self._accepted: deque[float] = deque()

    @staticmethod
    def now() -> float:
        """The event loop's monotonic clock."""
        return asyncio.get_running_loop().time()

    async def wait_turn(self) -> None:
        """Wait until the gate is open and the rate limiter grants a slot."""
        while True:
            delay = self._cooldown_until - self.now()
            if delay > 0:
                await asyncio.sleep(delay)
                continue
            self._grow()
            if self._limiter is not None:
                await self._limiter.acquire()
            now = self.now()
            if self._cooldown_until <= now:
                if self._active_since > now or self._active_since < self._cooldown_until:
                    self._active_since = now
                return

    def record(self, status_code: int, sent_at: float, retry_after: float | None) -> None:
        """Account one response of a request sent at loop time `sent_at`."""
        now = self.now()
        while self._accepted and self._accepted[0] <= now - 1.0:
            self._accepted.popleft()
        if status_code != 429:
            self._accepted.append(now)
            return
        pause = s.DEFAULT_COOLDOWN_WITHOUT_RETRY_AFTER if retry_after is None else retry_after
        self._cooldown_until = max(self._cooldown_until, now + pause)
        self._clean_since = self._cooldown_until
        if sent_at < self._last_decrease:
            return
        observed = len(self._accepted)
        if observed >= s.RATE_MIN_SAMPLE:
            self.ceiling = float(observed)
            full_window = now - self._active_since >= 1.0
            self._hold_for = s.RATE_PROBE_AFTER_SECONDS if full_window else s.RATE_TENTATIVE_HOLD
            new_rate = observed * s.RATE_DECREASE_FACTOR
        elif self.rate:
            new_rate = self.rate * 0.5
        elif self._gate_failed_before:
            new_rate = s.RATE_MIN_SAMPLE * s.RATE_DECREASE_FACTOR
        else:
            new_rate, self._gate_failed_before = None, True
        if new_rate is not None:
            new_rate = max(s.RATE_MIN, min(new_rate, self.rate or new_rate))
            self._set_rate(new_rate)
            logger.debug("429: rate limited to %.1f req/s (ceiling %s)", new_rate, self.ceiling)
        self._last_decrease = now
        self._held_seconds = self._probe_steps = 0

    def _grow(self) -> None:
        if self.rate is None or self._clean_since is None:
            return
        steps = int(self.now() - self._clean_since)
        if steps < 1:
            return
        self._clean_since += steps
        rate = self.rate
        for _ in range(min(steps, 600)):
            hold = self.ceiling * s.RATE_HOLD_FRACTION if self.ceiling else None
            if hold is not None and rate < hold:
                rate = min(rate * (1 + s.RATE_FAST_GROWTH), hold)
            elif hold is not None and self._held_seconds < self._hold_for:
                self._held_seconds += 1
            else:
                gentle = hold is not None and self._hold_for >= s.RATE_PROBE_AFTER_SECONDS
                start = s.RATE_PROBE_GROWTH if gentle else s.RATE_FAST_GROWTH
                rate *= 1 + min(start * 2**self._probe_steps, s.RATE_MAX_GROWTH)
                self._probe_steps += 1
            if self.ceiling and rate > self.ceiling * s.RATE_FORGET_CEILING_FACTOR:
                self.ceiling = None
        if self.max_rate:
            rate = min(rate, self.max_rate)
        if rate != self.rate:
            self._set_rate(rate)

    def _set_rate(self, rate: float) -> None:
        self.rate = rate
        if self._limiter is None:
            self._limiter = _Limiter(rate)
        else:
            self._limiter.set_rate(rate)


