"""One request budget per account, shared by every flow run: a Prefect global rate limit.

Workers that sync namespaces of the same account share the service's rate limit, which
counts per login, not per process. Each flow run therefore draws its requests from one
Prefect global concurrency limit with slot decay (a rate limit), named after the account
(:func:`limit_name`: a hash of the base URL and the account, never the e-mail itself)
and created on first use with one second's worth of slots (at least two blocks),
decaying at ``requests_per_second``. Together the runs stay under ``requests_per_second``.

A run does not ask Prefect for every request: :class:`PrefectRequestBudget` leases a
block of ``block`` slots at once (``rate_limit(name, occupy=block)``) and hands them out
one per request; when half of a block is used, the next request leases the next block
while the others go on with what is left, so requests rarely wait for Prefect's API. One Prefect call serves ``block``
requests (``block`` = 0.2 s worth of ``requests_per_second``, at least 1).

Without ``requests_per_second`` there is no rate to share and no budget is used.
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
from prefect.concurrency.asyncio import rate_limit
from prefect.exceptions import ObjectAlreadyExists

if TYPE_CHECKING:
    from pipelines.company_connections import SourceSettings

__all__ = ["PrefectRequestBudget", "account_budget", "limit_name"]

logger = logging.getLogger("diligence.flow")

#: Seconds of `requests_per_second` one lease covers.
LEASE_SECONDS = 0.5


def limit_name(base_url: str, account: str) -> str:
    """The Prefect limit of one account: ``diligence-requests-<12 hex digits>``."""
    digest = hashlib.sha256(f"{base_url.rstrip('/')}\n{account}".encode()).hexdigest()
    return f"diligence-requests-{digest[:12]}"


def _account(settings: SourceSettings) -> str:
    """Who the service counts requests for: the e-mail, or a token's subject."""
    if settings.email:
        return str(settings.email)
    try:
        claims = jwt.decode(str(settings.access_token), options={"verify_signature": False})
        return f"sub:{claims['sub']}"
    except (jwt.PyJWTError, KeyError):
        return "token:" + hashlib.sha256(str(settings.access_token).encode()).hexdigest()


class PrefectRequestBudget:
    """A :class:`~pipelines.company_connections.limits.RequestBudget` leased from a
    Prefect rate limit `name` in blocks of `block` requests."""

    def __init__(self, name: str, block: int) -> None:
        self.name = name
        self.block = max(1, block)
        #: Prefect calls made, and requests handed out
        self.leases = self.requests = 0
        self._left = 0
        self._leasing = False
        self._changed: asyncio.Condition | None = None

    @contextlib.asynccontextmanager
    async def request(self) -> AsyncIterator[None]:
        """Wait for one request of the budget (nothing is given back: slots decay)."""
        await self._take()
        yield

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


def account_budget(settings: SourceSettings) -> PrefectRequestBudget | None:
    """The account's shared budget (its Prefect limit created or updated first), or None
    without `requests_per_second`."""
    rate = settings.requests_per_second
    if not rate:
        logger.info("requests_per_second is not set: this run's requests are not shared "
                    "with other runs of the account (set it to share one budget)")
        return None
    block = max(1, math.ceil(rate * LEASE_SECONDS))
    name = limit_name(settings.base_url, _account(settings))
    with get_client(sync_client=True) as client:
        try:
            client.upsert_global_concurrency_limit_by_name(name, _capacity(rate, block),
                                                           slot_decay_per_second=rate)
        except ObjectAlreadyExists:
            pass  # another run created it at the same moment
    return PrefectRequestBudget(name, block)
