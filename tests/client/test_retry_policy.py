"""The hand-off from the bare first attempt to tenacity: its edges, through the transport."""

from __future__ import annotations

import time

import httpx
import pytest

from pipelines.company_connections.errors import NotFoundError, RequestFailedError

from .fakes import FakeService, sequence

pytestmark = pytest.mark.anyio

NS = "ns-1"
COMPANY = "/api/companies/c-1"


async def test_one_attempt_allowed_means_no_retry() -> None:
    service = FakeService()
    service.route("GET", COMPANY, sequence(httpx.Response(502, text="bad gateway")))
    async with service.client(max_attempts=1) as client:
        with pytest.raises(RequestFailedError) as info:
            await client.company(NS, "c-1")
    assert len(service.calls(COMPANY)) == 1
    error = info.value
    assert (error.attempts, error.last_error, error.status_code) == (1, "HTTP 502", 502)
    assert client.stats.retries == 0


async def test_an_answer_not_retried_stops_the_retries_as_itself() -> None:
    service = FakeService()
    service.route("GET", COMPANY, sequence(httpx.Response(503, text="busy"),
                                           httpx.Response(404, json={"message": "gone"})))
    async with service.client(max_attempts=5) as client:
        with pytest.raises(NotFoundError) as info:
            await client.company(NS, "c-1")
    assert len(service.calls(COMPANY)) == 2
    assert info.value.status_code == 404
    assert client.stats.retries == 1


async def test_backoff_is_capped_at_backoff_max() -> None:
    service = FakeService()
    stamps: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        stamps.append(time.monotonic())
        return httpx.Response(500, text="down")

    service.route("GET", COMPANY, handler)
    # Uncapped, the fifth wait could reach 16 x 0.05 s; capped, every wait is at most 0.05 s.
    async with service.client(max_attempts=6, backoff_initial=0.05, backoff_max=0.05) as client:
        with pytest.raises(RequestFailedError) as info:
            await client.company(NS, "c-1")
    gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    assert info.value.attempts == 6 and len(gaps) == 5
    assert max(gaps) < 0.05 + 0.2  # the cap plus scheduling slack on a busy machine
    assert client.stats.retries == 5
