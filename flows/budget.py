"""One request budget per account, shared by every flow run: Prefect global limits.

Workers that sync namespaces of the same account share the service's limits, which
count per login, not per process. Each flow run therefore draws its requests from two
Prefect global concurrency limits named after the account (:func:`limit_name`: a hash
of the base URL and the account, never the e-mail itself), created on first use:

* **the rate**, ``diligence-requests-…``: a limit with slot decay (a rate limit) of one
  second's worth of slots (at least two blocks), decaying at ``requests_per_second``.
  Together the runs stay under ``requests_per_second``. Without that setting there is
  no rate to share and this limit is not used.
* **requests in flight**, ``diligence-inflight-…``: a plain concurrency limit of
  ``max_concurrency`` slots. Together the runs never have more than ``max_concurrency``
  requests in flight.

Neither is asked for every request. :class:`PrefectRequestBudget` leases the rate in
blocks of ``block`` slots (``rate_limit(name, occupy=block)``, 0.5 s worth of
``requests_per_second``) and hands them out one per request; when half of a block is
used, the next request leases the next block while the others go on with what is left.
In-flight slots (:class:`InflightShare`) are leased in blocks of a quarter of
``max_concurrency`` and held, under a Prefect lease that Prefect renews, for as long as
the run uses them: a run tops up by one block when a request has waited
``INFLIGHT_TOPUP_AFTER_SECONDS`` for one of its busy slots, or at once when a block's
worth of requests waits (with quick answers no single request waits that long, yet the
queue is there), gives a block back when two whole blocks have lain idle for
``INFLIGHT_IDLE_SECONDS``, and gives everything back at its end.
A run killed without giving back loses its slots when their lease runs out
(``INFLIGHT_LEASE_SECONDS``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import jwt
from prefect import get_client
from prefect.concurrency.asyncio import concurrency, rate_limit
from prefect.exceptions import ObjectAlreadyExists

if TYPE_CHECKING:
    from prefect.client.orchestration import SyncPrefectClient

    from pipelines.company_connections import SourceSettings

__all__ = ["InflightShare", "PrefectRequestBudget", "account_budget", "limit_name"]

logger = logging.getLogger("diligence.flow")

#: Seconds of `requests_per_second` one lease covers.
LEASE_SECONDS = 0.5
#: In-flight slots per lease: this share of `max_concurrency` (at least one slot).
INFLIGHT_BLOCK_SHARE = 0.25
#: How long a request waits for one of the run's busy slots before the run leases one
#: more block (slots free up within milliseconds when responses are quick); a block's
#: worth of waiting requests leases it at once.
INFLIGHT_TOPUP_AFTER_SECONDS = 0.1
#: How long two whole blocks of a run lie idle before it gives one back (requests come
#: in bursts as rate blocks arrive: giving back at once would lease again a moment later).
INFLIGHT_IDLE_SECONDS = 2.0
#: How long a run's in-flight slots outlive it if it is killed (Prefect renews the lease
#: while the run is alive).
INFLIGHT_LEASE_SECONDS = 60.0


def limit_name(base_url: str, account: str, kind: str = "requests") -> str:
    """The Prefect limit of one account: ``diligence-<kind>-<12 hex digits>``, `kind`
    being ``requests`` (the rate) or ``inflight``."""
    digest = hashlib.sha256(f"{base_url.rstrip('/')}\n{account}".encode()).hexdigest()
    return f"diligence-{kind}-{digest[:12]}"


def _account(settings: SourceSettings) -> str:
    """Who the service counts requests for: the e-mail, or a token's subject."""
    if settings.email:
        return str(settings.email)
    try:
        claims = jwt.decode(str(settings.access_token), options={"verify_signature": False})
        return f"sub:{claims['sub']}"
    except (jwt.PyJWTError, KeyError):
        return "token:" + hashlib.sha256(str(settings.access_token).encode()).hexdigest()


class InflightShare:
    """This run's share of the account's in-flight limit `name`, leased from Prefect in
    blocks of `block` slots (see the module docstring)."""

    def __init__(self, name: str, block: int) -> None:
        self.name = name
        self.block = max(1, block)
        #: Prefect acquisitions made, and the most slots held at once
        self.leases = self.most_held = 0
        self._holders: list[tuple[asyncio.Task[None], asyncio.Event]] = []
        self._returning: list[asyncio.Task[None]] = []  # blocks being given back
        self._in_use = 0
        self._wanting = 0  # requests waiting a moment for a busy slot to free up
        self._idle_check: asyncio.TimerHandle | None = None
        self._busy_at = 0.0  # when fewer than two blocks last lay idle
        self._leasing: asyncio.Task[None] | None = None
        self._failed: BaseException | None = None
        self._changed: asyncio.Condition | None = None

    @property
    def held(self) -> int:
        """Slots this run holds now."""
        return self.block * len(self._holders)

    @property
    def waiting(self) -> bool:
        """Whether a lease is being waited for (every held slot is busy)."""
        return self._leasing is not None

    @property
    def queued(self) -> bool:
        """Whether the run holds nothing and waits for other runs to give slots back."""
        return self._leasing is not None and not self._holders

    async def acquire(self) -> None:
        """Take one held slot. When every held slot is busy, wait for one to free up,
        and lease one more block once this request has waited
        `INFLIGHT_TOPUP_AFTER_SECONDS` or a block's worth of requests waits (at once
        when none is held)."""
        changed = self._condition()
        async with changed:
            if self._in_use >= self.held and self.held:
                self._wanting += 1
                changed.notify_all()  # the requests waiting may now be a block's worth
                try:
                    # asyncio.timeout, not wait_for: wait_for runs the wait in a task of
                    # its own, and a second cancel (the sync's own on top of its task
                    # group's) left that task to take the condition's lock after this one
                    # had let go of it, so every request waited for the lock forever
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(INFLIGHT_TOPUP_AFTER_SECONDS):
                            await changed.wait_for(
                                lambda: self._in_use < self.held or self._wanting >= self.block)
                finally:
                    self._wanting -= 1
            while self._in_use >= self.held:
                if self._failed is not None:
                    raise self._failed
                if self._leasing is None:
                    self._leasing = asyncio.create_task(self._lease())
                await changed.wait()
            self._in_use += 1
            if self._idle_blocks() < 2:
                self._busy_at = asyncio.get_running_loop().time()

    async def release(self) -> None:
        """Give one slot back; once two blocks lie idle, check again after
        `INFLIGHT_IDLE_SECONDS` whether one can go back to Prefect."""
        changed = self._condition()
        async with changed:
            self._in_use -= 1
            changed.notify()
        if self._idle_check is None and self._idle_blocks() >= 2:
            self._idle_check = asyncio.get_running_loop().call_later(
                INFLIGHT_IDLE_SECONDS, self._give_back_idle)

    def _idle_blocks(self) -> int:
        return (self.held - self._in_use) // self.block

    def _give_back_idle(self) -> None:
        """Give back one block if two have lain idle for `INFLIGHT_IDLE_SECONDS` (and
        check again while two lie idle)."""
        self._idle_check = None
        if self._idle_blocks() < 2:
            return
        loop = asyncio.get_running_loop()
        idle_for = loop.time() - self._busy_at
        if idle_for >= INFLIGHT_IDLE_SECONDS:
            task, release = self._holders.pop()
            release.set()
            self._returning = [t for t in self._returning if not t.done()] + [task]
            self._busy_at = loop.time()
            idle_for = 0.0
        if self._idle_blocks() >= 2:
            self._idle_check = loop.call_later(INFLIGHT_IDLE_SECONDS - idle_for,
                                               self._give_back_idle)

    async def aclose(self) -> None:
        """Give every block back (the run is over)."""
        if self._leasing is not None:
            self._leasing.cancel()
        if self._idle_check is not None:
            self._idle_check.cancel()
            self._idle_check = None
        holders, self._holders = self._holders, []
        for _, release in holders:
            release.set()
        await asyncio.gather(*(task for task, _ in holders), *self._returning,
                             return_exceptions=True)

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def _lease(self) -> None:
        """Lease one block; a task of its own holds it (Prefect's lease, renewed by
        Prefect) until its release event is set."""
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        release = asyncio.Event()

        async def hold() -> None:
            async with concurrency(self.name, occupy=self.block, strict=True,
                                   lease_duration=INFLIGHT_LEASE_SECONDS):
                granted.set_result(None)
                await release.wait()

        task = asyncio.create_task(hold())
        changed = self._condition()
        try:
            await asyncio.wait({task, granted}, return_when=asyncio.FIRST_COMPLETED)
            if not granted.done():
                self._failed = task.exception() or RuntimeError(
                    f"the lease on Prefect limit {self.name} ended before it was granted")
                return  # the error reaches the requests waiting for a slot
            self.leases += 1
            async with changed:
                self._holders.append((task, release))
                self.most_held = max(self.most_held, self.held)
        finally:
            async with changed:
                self._leasing = None
                changed.notify_all()


class PrefectRequestBudget:
    """A :class:`~pipelines.company_connections.limits.RequestBudget` drawn from the
    account's Prefect limits: the rate limit `name` leased in blocks of `block`
    requests (None: no rate is shared), and the in-flight share `inflight`."""

    def __init__(self, name: str | None, block: int,
                 inflight: InflightShare | None = None) -> None:
        self.name = name
        self.block = max(1, block)
        self.inflight = inflight
        #: Prefect calls made for the rate, and requests handed out
        self.leases = self.requests = 0
        self._left = 0
        self._leasing = False
        self._changed: asyncio.Condition | None = None

    @contextlib.asynccontextmanager
    async def request(self, *, slot: bool = True) -> AsyncIterator[None]:
        """Wait for one request of the rate (nothing is given back: slots decay), then,
        if `slot`, hold one in-flight slot while the request is out (a login or a
        renewal holds none: the requests holding every slot may be waiting for it)."""
        if self.name is not None:
            await self._take()
        else:
            self.requests += 1
        if self.inflight is None or not slot:
            yield
            return
        await self.inflight.acquire()
        try:
            yield
        finally:
            await self.inflight.release()

    def waiting_for(self) -> str:
        """What the budget waits for now, in a few words ("" for nothing)."""
        parts = []
        if self._leasing:
            parts.append(f"waiting for the account's shared rate (Prefect limit {self.name})")
        if self.inflight is not None and self.inflight.waiting:
            parts.append("waiting for the account's shared in-flight slots "
                         f"(Prefect limit {self.inflight.name}, {self.inflight.held} held)")
        return "; ".join(parts)

    def queued(self) -> bool:
        """Whether requests wait, holding nothing, for other runs of the account."""
        return self.inflight is not None and self.inflight.queued

    async def aclose(self) -> None:
        """Give back what is held (the client is closing)."""
        if self.inflight is not None:
            await self.inflight.aclose()

    async def _take(self) -> None:
        if self._changed is None:
            self._changed = asyncio.Condition()
        if self._left < self.block // 2 + 1 and not self._leasing:
            await self._lease()  # ahead of need: the others go on with what is left
        if self._left == 0:
            async with self._changed:
                await self._changed.wait_for(lambda: self._left > 0 or not self._leasing)
            if self._left == 0:
                await self._take()  # the lease being waited for failed or was spent
                return
        self._left -= 1
        self.requests += 1

    async def _lease(self) -> None:
        """Lease one block, in the requesting task itself (a lease awaited from a task of
        its own takes Prefect's client about 20 times longer)."""
        assert self._changed is not None
        self._leasing = True
        try:
            await rate_limit(self.name, occupy=self.block, strict=True)
            self.leases += 1
            self._left += self.block
        finally:
            self._leasing = False
            async with self._changed:
                self._changed.notify_all()


def _capacity(rate: float, block: int) -> int:
    """Slots of the limit: a second's worth of requests (a service's bucket usually holds
    as much), and at least two blocks, so one run can lease ahead while another uses
    its block."""
    return max(2 * block, math.ceil(rate))


def account_budget(settings: SourceSettings) -> PrefectRequestBudget:
    """The account's shared budget, its Prefect limits created or updated first: the
    in-flight limit always, the rate limit with `requests_per_second`."""
    account = _account(settings)
    concurrent = int(settings.max_concurrency)
    inflight = InflightShare(limit_name(settings.base_url, account, "inflight"),
                             max(1, math.ceil(concurrent * INFLIGHT_BLOCK_SHARE)))
    rate = settings.requests_per_second
    name = limit_name(settings.base_url, account) if rate else None
    block = max(1, math.ceil((rate or 0) * LEASE_SECONDS))
    with get_client(sync_client=True) as client:
        _upsert(client, inflight.name, concurrent, 0.0)
        if name is not None and rate:
            _upsert(client, name, _capacity(rate, block), rate)
    if name is None:
        logger.info("requests_per_second is not set: this run shares its requests in "
                    "flight with other runs of the account, not a rate (set it to share "
                    "one)")
    return PrefectRequestBudget(name, block, inflight)


def _upsert(client: SyncPrefectClient, name: str, limit: int, decay: float) -> None:
    """Create or update the limit `name` (a run of the account may do so at the same
    moment)."""
    try:
        client.upsert_global_concurrency_limit_by_name(name, limit,
                                                       slot_decay_per_second=decay or None)
    except ObjectAlreadyExists:
        pass
