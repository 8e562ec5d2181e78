"""Pacing of the client's requests: slots by priority, a shared budget, an adaptive rate.

* `PriorityGate`: the client's `max_concurrency` slots, held per attempt and handed to
  waiting requests by their task's `request_priority` (a namespace's order), so
  namespaces complete one after another.
* `RequestBudget`: what the client draws from when processes of one account share a
  budget (the orchestrator provides it).
* `AdaptiveThrottle`: the rate, which converges to what the service allows.

A 429 means one of two things, and the cure differs:

* **we go too fast** (a token bucket, a quota): slowing down makes the 429s stop;
* **the service sheds load** (a gateway or a shared backend refusing a share of all
  requests): the 429s come at the same share however slowly we go, so slowing
  down only makes the sync crawl.

`AdaptiveThrottle` tells them apart by trying: **cut, then verify.**

1. A 429 that is not explained by a known shedding share *cuts* the rate (once per
   verification: a bounded decrease) to 0.9 x the rate the service accepted over the
   last second (or since traffic started, at least ``RATE_MIN_WINDOW``), and closes the gate (nothing is sent) until its ``Retry-After``.
2. It then *verifies*: it compares the 429 share of the requests sent before the cut
   with the share of those sent after it: at least ``VERIFY_MIN_RESPONSES`` of them
   over at least ``VERIFY_MIN_SECONDS``, until ``VERIFY_EVIDENCE`` 429s came after
   the cut or would have come at the share before it (``VERIFY_MAX_SECONDS`` at most).

   * The share fell by half or more: going faster caused the 429s. The cut stays,
     and the old rate is remembered as a ceiling (the rate grows back to 97 % of it,
     holds there for 20 s, then probes upwards, see `_grow`).
   * The share did not fall, and most requests still pass: the 429s do not depend
     on our rate. Every cut is undone (back to `requests_per_second`, or no limit)
     and that share
     becomes the *tolerated* share: from then on a 429 is only retried after its own
     ``Retry-After``; it neither cuts the rate nor stops other requests, unless the
     429 share over the last ``SHARE_WINDOW_SECONDS`` rises clearly above the
     tolerated share (then 1. again). The tolerated share is forgotten after
     ``TOLERANCE_MEMORY_SECONDS`` without a 429.
   * Most requests are still refused (a quota used up): cut again, and wait for the
     longest ``Retry-After`` seen.

Every request waits at least its own ``Retry-After`` before it is sent again
(`retries`); 503s and timeouts are retried per request and never touch the rate. The
rate never exceeds the configured `requests_per_second`.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import logging
import math
from collections import deque
from collections.abc import AsyncIterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from aiolimiter import AsyncLimiter

from . import settings as s

__all__ = ["AdaptiveThrottle", "PriorityGate", "RequestBudget", "request_priority"]

logger = logging.getLogger("diligence.client")


class RequestBudget(Protocol):
    """A budget of requests shared with other processes of the same account (e.g. a
    Prefect global concurrency and rate limit). The client enters `request()` around
    every attempt it sends, inside its own slot and after its own pacing: entering
    waits for the request's share of the budget, leaving gives back what is held only
    while the request is in flight. A login or a token renewal enters it with
    ``slot=False``: it takes its share of the rate but holds no in-flight slot, since
    the requests holding every slot may be waiting for exactly that token. The client
    calls `aclose()` when it closes."""

    def request(self, *, slot: bool = True) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold one request's share of the budget while it is in flight (without an
        in-flight slot unless `slot`)."""
        ...

    def waiting_for(self) -> str:
        """What the budget waits for now, in a few words ("" for nothing)."""
        ...

    def queued(self) -> bool:
        """Whether requests wait, holding nothing, for other processes of the account to
        give back their share: the account is busy, the service is not stalled."""
        ...

    async def aclose(self) -> None:
        """Give back whatever the budget still holds."""
        ...


#: The priority of the current task's requests for a slot (lower first); a namespace's
#: reader sets it once, and every task it starts inherits it.
request_priority: ContextVar[int] = ContextVar("request_priority", default=0)


class PriorityGate:
    """A concurrency limit that serves waiting requests by priority, then first come.

    Namespaces get their priority from their order: while the first one has requests to
    make, it gets every free slot; the others fill the slots it leaves idle (while it
    waits for a parent response). So namespaces complete one after another, and each
    one's load overlaps with the fetch of those still running, instead of all of them
    completing together at the end.
    """

    def __init__(self, limit: int) -> None:
        self._limit = self._free = max(1, limit)
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = 0

    async def acquire(self, priority: int) -> None:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._seq += 1
        heapq.heappush(self._waiters, (priority, self._seq, future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():
                self.release()  # the slot was handed over just as we were cancelled
            raise

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one slot, asked for with the current task's :data:`request_priority`."""
        await self.acquire(request_priority.get())
        try:
            yield
        finally:
            self.release()

    @property
    def busy(self) -> int:
        """Slots held now."""
        return self._limit - self._free

    def release(self) -> None:
        while self._waiters:
            _, _, future = heapq.heappop(self._waiters)
            if not future.done():
                future.set_result(None)
                return
        self._free += 1


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


@dataclass
class _Verification:
    """The 429 shares before and after one cut of the rate."""

    cut_at: float
    reopen_at: float
    before: int = 0
    before_429: int = 0
    after: int = 0
    after_429: int = 0
    longest_retry_after: float = 0.0

    def count(self, sent_at: float, throttled: bool, retry_after: float | None) -> None:
        if sent_at < self.cut_at:
            self.before += 1
            self.before_429 += throttled
        elif sent_at >= self.reopen_at:
            self.after += 1
            self.after_429 += throttled
            if throttled:
                self.longest_retry_after = max(self.longest_retry_after, retry_after or 0.0)

    def ready(self, now: float) -> bool:
        """Enough evidence: the 429s after the cut, or enough responses that the share
        before it would have produced several (or the verification ran long enough)."""
        if self.after_429 >= s.VERIFY_EVIDENCE and self.share_after >= s.SHED_MAX_SHARE:
            return True  # still refused most of the time: no need to wait longer
        if self.after < s.VERIFY_MIN_RESPONSES or now - self.reopen_at < s.VERIFY_MIN_SECONDS:
            return False
        return (self.after_429 >= s.VERIFY_EVIDENCE
                or self.after * self.share_before >= s.VERIFY_EVIDENCE
                or now - self.reopen_at >= s.VERIFY_MAX_SECONDS)

    @property
    def share_before(self) -> float:
        return self.before_429 / self.before if self.before else 0.0

    @property
    def share_after(self) -> float:
        return self.after_429 / self.after if self.after else 0.0


class AdaptiveThrottle:
    """Shared pacing of all requests to the service (see the module docstring)."""

    def __init__(self, requests_per_second: float | None = None) -> None:
        self.max_rate = requests_per_second
        self.rate: float | None = requests_per_second
        self.ceiling: float | None = None
        #: share of requests the service refuses with 429 whatever our rate (0: none known)
        self.tolerated_share = 0.0
        #: cuts of the rate, and those undone because the 429s did not depend on the rate
        self.cuts = self.cuts_undone = 0
        self._limiter = _Limiter(requests_per_second) if requests_per_second else None
        self._cooldown_until = 0.0
        self._last_decrease = float("-inf")
        self._last_429 = float("-inf")
        self._clean_since: float | None = None
        self._held_seconds = self._probe_steps = 0
        self._hold_for = s.RATE_PROBE_AFTER_SECONDS
        self._active_since = float("inf")
        self._gate_failed_before = False
        self._accepted: deque[float] = deque()
        self._recent: deque[tuple[float, bool]] = deque()  # (arrival, was a 429)
        self._recent_429 = 0
        self._verifying: _Verification | None = None

    @staticmethod
    def now() -> float:
        """The event loop's monotonic clock."""
        return asyncio.get_running_loop().time()

    def gate_wait(self) -> float:
        """Seconds until the gate opens again (0 when it is open)."""
        return max(0.0, self._cooldown_until - self.now())

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
        throttled = status_code == 429
        self._observe(now, throttled)
        verifying = self._verifying
        if verifying is not None:
            verifying.count(sent_at, throttled, retry_after)
            if verifying.ready(now):
                self._judge(verifying, now)
                return
        if not throttled:
            return
        self._last_429 = now
        if verifying is not None or sent_at < self._last_decrease:
            return  # being verified, or in flight during the last cut
        if self.tolerated_share and not self._above_tolerated():
            return  # shed by the service at its usual share: retried after its Retry-After
        self._cut(now, retry_after)

    # -- cut and verify -------------------------------------------------------------

    def _observe(self, now: float, throttled: bool) -> None:
        while self._accepted and self._accepted[0] <= now - 1.0:
            self._accepted.popleft()
        if not throttled:
            self._accepted.append(now)
        recent = self._recent
        recent.append((now, throttled))
        self._recent_429 += throttled
        while recent and recent[0][0] <= now - s.SHARE_WINDOW_SECONDS:
            self._recent_429 -= recent.popleft()[1]
        if self.tolerated_share and now - self._last_429 > s.TOLERANCE_MEMORY_SECONDS:
            logger.debug("no 429 for %ss: the tolerated share is forgotten",
                         s.TOLERANCE_MEMORY_SECONDS)
            self.tolerated_share = 0.0

    def _above_tolerated(self) -> bool:
        """Is the 429 share of the last window clearly above the tolerated share?"""
        n = len(self._recent)
        p = self.tolerated_share
        margin = 3 * math.sqrt(p * (1 - p) / n) + s.SHARE_MARGIN
        return self._recent_429 / n > p + margin

    def _cut(self, now: float, retry_after: float | None) -> None:
        pause = s.DEFAULT_COOLDOWN_WITHOUT_RETRY_AFTER if retry_after is None else retry_after
        self._cooldown_until = max(self._cooldown_until, now + pause)
        before = _Verification(cut_at=now, reopen_at=self._cooldown_until)
        for _, throttled in self._recent:  # the share that led to the cut
            before.before += 1
            before.before_429 += throttled
        self._verifying = before
        self._clean_since = None
        self.cuts += 1
        observed = len(self._accepted)
        if observed >= s.RATE_MIN_SAMPLE:
            # accepted per second, over the last second or the time traffic has run
            window = min(1.0, max(now - self._active_since, s.RATE_MIN_WINDOW))
            self.ceiling = observed / window
            full_window = window >= 1.0
            self._hold_for = s.RATE_PROBE_AFTER_SECONDS if full_window else s.RATE_TENTATIVE_HOLD
            new_rate = self.ceiling * s.RATE_DECREASE_FACTOR
        elif self.rate:
            new_rate = self.rate * 0.5
        elif self._gate_failed_before:
            new_rate = s.RATE_MIN_SAMPLE * s.RATE_DECREASE_FACTOR
        else:
            new_rate, self._gate_failed_before = None, True
        if new_rate is not None:
            new_rate = max(s.RATE_MIN, min(new_rate, self.rate or new_rate))
            self._set_rate(new_rate)
        logger.debug("429: rate cut to %s req/s, gate closed %.1fs", new_rate, pause)
        self._last_decrease = now
        self._held_seconds = self._probe_steps = 0

    def _judge(self, check: _Verification, now: float) -> None:
        """End a verification: keep the cut, undo it, or cut again (module docstring)."""
        self._verifying = None
        self._clean_since = now
        after, before = check.share_after, check.share_before
        if after >= s.SHED_MAX_SHARE:
            logger.debug("429 share still %.0f %% after a cut: cutting again", 100 * after)
            self._cut(now, check.longest_retry_after or None)
        elif after > before * s.VERIFY_FALL:
            self.cuts_undone += 1
            self.tolerated_share = max(self.tolerated_share, after)
            self.ceiling = None
            self._restore(self.max_rate)  # undo every cut: none of them helped
            logger.info("the service refuses %.1f %% of requests (429) whatever our rate "
                        "(%.1f %% before slowing down): not slowing down for them",
                        100 * after, 100 * before)

    def _restore(self, rate: float | None) -> None:
        if rate is None:
            self.rate, self._limiter = None, None
        else:
            self._set_rate(rate)

    # -- growth ---------------------------------------------------------------------

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
