"""Retries: what is retried, what is not, Retry-After, and the final error."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from pipelines.company_connections.errors import (
    BadRequestError,
    DeniedError,
    NotFoundError,
    RequestFailedError,
    ResponseFormatError,
)
from pipelines.company_connections.responses import retry_after as _retry_after

from .fakes import FakeService, sequence

pytestmark = pytest.mark.anyio

NS = "ns-1"
COMPANY = "/api/companies/c-1"
OK = httpx.Response(200, json={"id": "c-1", "name": "Acme"})


@pytest.mark.parametrize("failure", [
    httpx.Response(500, text="internal error"),
    httpx.Response(502, text="bad gateway"),
    httpx.Response(503, text="unavailable"),
    httpx.Response(504, text="gateway timeout"),
    httpx.Response(429, text="slow down", headers={"Retry-After": "0"}),
    httpx.ReadTimeout("timed out"),
    httpx.ConnectTimeout("timed out"),
    httpx.ConnectError("connection refused"),
    httpx.RemoteProtocolError("peer closed connection without sending complete message body"),
    httpx.Response(200, content=b'{"id": "c-1", "name": '),  # truncated JSON
    httpx.Response(200, content=b"<html>proxy error</html>"),
    httpx.Response(200, json={"name": "no id"}),  # fails validation of required keys
    httpx.Response(200, json=["not", "an", "object"]),
], ids=lambda f: type(f).__name__ if isinstance(f, Exception) else f"{f.status_code}")
async def test_retried_then_succeeds(failure) -> None:
    service = FakeService()
    service.route("GET", COMPANY, sequence(failure, failure, OK))
    async with service.client() as client:
        company = await client.company(NS, "c-1")
    assert company.name == "Acme"
    assert len(service.calls(COMPANY)) == 3
    assert client.stats.retries == 2


async def test_bounded_attempts_raise_request_failed_with_details() -> None:
    service = FakeService()
    service.route("GET", COMPANY, sequence(httpx.Response(503, text="maintenance window")))
    async with service.client(max_attempts=4) as client:
        with pytest.raises(RequestFailedError) as info:
            await client.company(NS, "c-1")
    error = info.value
    assert len(service.calls(COMPANY)) == 4
    assert (error.method, error.path, error.namespace) == ("GET", COMPANY, NS)
    assert (error.status_code, error.attempts, error.last_error) == (503, 4, "HTTP 503")
    assert str(error) == (f"GET {COMPANY} [namespace {NS}] failed after 4 attempt(s); "
                          "last error: HTTP 503: maintenance window")


async def test_429s_do_not_use_up_the_attempts_of_other_failures() -> None:
    service = FakeService()
    throttled = httpx.Response(429, headers={"Retry-After": "0"})
    service.route("GET", COMPANY, sequence(throttled, httpx.Response(503), throttled, throttled,
                                           httpx.Response(503), throttled, OK))
    async with service.client(max_attempts=3) as client:
        company = await client.company(NS, "c-1")
    assert company.name == "Acme" and len(service.calls(COMPANY)) == 7


async def test_429s_alone_are_bounded_too() -> None:
    service = FakeService()
    service.route("GET", COMPANY, sequence(httpx.Response(429, headers={"Retry-After": "0"})))
    async with service.client(max_attempts=2) as client:
        with pytest.raises(RequestFailedError) as info:
            await client.company(NS, "c-1")
    assert info.value.attempts == 2 * 4 and info.value.status_code == 429


async def test_exhausted_transport_errors_name_the_exception() -> None:
    service = FakeService()
    service.route("GET", COMPANY, sequence(httpx.ReadTimeout("timed out")))
    async with service.client(max_attempts=3) as client:
        with pytest.raises(RequestFailedError) as info:
            await client.company(NS, "c-1")
    assert info.value.last_error == "ReadTimeout" and info.value.status_code is None
    assert isinstance(info.value.__cause__, httpx.ReadTimeout)
    assert client.stats.transport_errors == 3


async def test_exhausted_malformed_bodies_chain_a_response_format_error() -> None:
    service = FakeService()
    service.route("GET", COMPANY, sequence(httpx.Response(200, content=b"{broken")))
    async with service.client(max_attempts=2) as client:
        with pytest.raises(RequestFailedError) as info:
            await client.company(NS, "c-1")
    assert info.value.last_error == "ResponseFormatError"
    assert isinstance(info.value.__cause__, ResponseFormatError)


@pytest.mark.parametrize(("status", "kind"), [
    (400, BadRequestError), (403, DeniedError), (404, NotFoundError), (409, BadRequestError),
    (422, BadRequestError),
])
async def test_not_retried(status, kind) -> None:
    service = FakeService()
    service.route("GET", COMPANY, sequence(httpx.Response(status, json={"message": "no"}), OK))
    async with service.client() as client:
        with pytest.raises(kind) as info:
            await client.company(NS, "c-1")
    assert len(service.calls(COMPANY)) == 1
    assert info.value.status_code == status
    assert info.value.namespace == NS
    assert '"message":"no"' in info.value.message


@pytest.mark.parametrize("status", [429, 503])
async def test_retry_after_is_honoured(status) -> None:
    service = FakeService()
    stamps: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        stamps.append(time.monotonic())
        if len(stamps) == 1:
            return httpx.Response(status, headers={"Retry-After": "0.3"})
        return OK

    service.route("GET", COMPANY, handler)
    async with service.client() as client:
        await client.company(NS, "c-1")
    assert stamps[1] - stamps[0] >= 0.29


async def test_a_429_pauses_every_other_request_until_retry_after() -> None:
    service = FakeService()
    stamps: dict[str, list[float]] = {"a": [], "b": []}

    async def handler(request: httpx.Request) -> httpx.Response:
        key = request.url.path.rsplit("/", 1)[1]
        stamps[key].append(time.monotonic())
        if key == "a" and len(stamps["a"]) == 1:
            return httpx.Response(429, headers={"Retry-After": "0.4"})
        return httpx.Response(200, json={"id": key})

    service.route("GET", "/api/companies/a", handler)
    service.route("GET", "/api/companies/b", handler)
    async with service.client() as client:
        await client.company(NS, "a")  # 429, then waits, then succeeds
        first_a = stamps["a"][0]
        await client.company(NS, "b")
    assert stamps["b"][0] - first_a >= 0.39
    assert client.stats.throttled == 1


@pytest.mark.parametrize("status", [429, 503])
async def test_a_retry_after_beyond_max_retry_after_fails_at_once_with_one_line(status) -> None:
    service = FakeService()
    service.route("GET", COMPANY, lambda request: httpx.Response(
        status, headers={"Retry-After": "600"}))
    started = time.monotonic()
    async with service.client(max_retry_after=120) as client:
        with pytest.raises(RequestFailedError) as info:
            await client.company(NS, "c-1")
    assert time.monotonic() - started < 5
    assert info.value.attempts == 1
    assert "asked to wait 600 s (Retry-After), more than max_retry_after (120 s)" in str(info.value)
    assert "\n" not in str(info.value)


def test_retry_after_parsing() -> None:
    def header(value: str) -> float | None:
        return _retry_after(httpx.Response(429, headers={"Retry-After": value}))

    assert header("2") == 2.0
    assert header("0.25") == 0.25
    assert header("-5") == 0.0
    assert header("100000") == 100000.0
    assert header("soon") is None
    future = time.time() + 30
    http_date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(future))
    assert 27 <= header(http_date) <= 31
    assert header("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


async def test_dropped_connection_mid_body_is_retried() -> None:
    """A real loopback socket: the first response promises 200 bytes, sends 20, closes."""
    connections = {"n": 0}
    body = b'{"id": "c-1", "name": "Acme"}'

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            connections["n"] += 1
            path = head.split(b" ", 2)[1]
            if path == b"/api/auth":
                payload = b'{"token": "opaque-loopback-token"}'
            elif connections["n"] == 2:
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: 200\r\n\r\n" + body[:20])
                await writer.drain()
                writer.close()
                return
            else:
                payload = body
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(payload), payload))
            await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        service = FakeService()
        async with service.client(base_url=f"http://127.0.0.1:{port}", transport=None) as client:
            company = await client.company(NS, "c-1")
    finally:
        server.close()
    assert company.name == "Acme"
    assert client.stats.transport_errors == 1 and client.stats.retries == 1
