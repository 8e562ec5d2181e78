"""The default (aiohttp) transport against real loopback sockets: error mapping,
timeouts per attempt, TLS and CA bundles, DNS failures and HTML answers."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import httpx
import pytest

from pipelines.company_connections.client import ServiceClient
from pipelines.company_connections.errors import (
    ConfigurationError,
    NotFoundError,
    RequestFailedError,
    ResponseFormatError,
)
from pipelines.company_connections.transport import (
    AiohttpTransport,
    CertificateError,
    NameResolutionError,
    map_error,
)

from .fakes import EMAIL, PASSWORD

pytestmark = pytest.mark.anyio

NS = "ns-1"
TOKEN = b'{"token": "opaque-loopback-token"}'
COMPANY = b'{"id": "c-1", "name": "Acme"}'
Serve = Callable[[bytes, int, asyncio.StreamWriter], Awaitable[bool]]


def _answer(body: bytes, status: str = "200 OK", content_type: bytes = b"application/json") -> bytes:
    return (b"HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-length: %d\r\n\r\n%s"
            % (status.encode(), content_type, len(body), body))


class RawServer:
    """An asyncio server on 127.0.0.1 answering each request through `serve(path, n, writer)`.

    `n` counts API requests (not logins); `serve` returns False to close the connection.
    Logins are answered with a token. Stops with its `async with`, and every handler
    is bounded by `limit` seconds.
    """

    def __init__(self, serve: Serve, *, ssl_context: ssl.SSLContext | None = None,
                 limit: float = 20.0) -> None:
        self.serve, self.ssl, self.limit = serve, ssl_context, limit
        self.requests = 0
        self.url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> RawServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self.ssl)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"{'https' if self.ssl else 'http'}://127.0.0.1:{port}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(self.limit):
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    path = head.split(b" ", 2)[1]
                    if path == b"/api/auth":
                        writer.write(_answer(TOKEN))
                        await writer.drain()
                        continue
                    self.requests += 1
                    if not await self.serve(path, self.requests, writer):
                        break
        except (asyncio.IncompleteReadError, ConnectionError, TimeoutError, ssl.SSLError):
            pass
        finally:
            writer.close()


def _client(url: str, **options: object) -> ServiceClient:
    settings: dict[str, object] = {"email": EMAIL, "password": PASSWORD, "max_attempts": 3,
                                   "backoff_initial": 0.001, "backoff_max": 0.01}
    settings.update(options)
    return ServiceClient(url, **settings)  # type: ignore[arg-type]


async def _fails_then_works(failure: Callable[[asyncio.StreamWriter], Awaitable[None]],
                            failures: int = 1) -> ServiceClient:
    """A server whose first `failures` API requests fail with `failure`, then answer."""
    async def serve(path: bytes, n: int, writer: asyncio.StreamWriter) -> bool:
        if n <= failures:
            await failure(writer)
            return False
        writer.write(_answer(COMPANY))
        await writer.drain()
        return True

    async with RawServer(serve) as server, _client(server.url, request_timeout=0.5) as client:
        assert (await client.company(NS, "c-1")).name == "Acme"
    return client


async def test_the_default_transport_is_aiohttp_with_a_connection_per_slot_and_one_for_auth() -> None:
    async with _client("http://127.0.0.1:9", max_concurrency=7) as client:
        sender = client._sender
        assert isinstance(sender, AiohttpTransport)
        assert sender._max_connections == 7 + 1  # login and renewal bypass the slots


async def _close_at_once(writer: asyncio.StreamWriter) -> None:
    writer.transport.abort()


async def _truncate_body(writer: asyncio.StreamWriter) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 200\r\n\r\n"
                 + COMPANY[:10])
    await writer.drain()


async def _garbage(writer: asyncio.StreamWriter) -> None:
    writer.write(b"NOT HTTP AT ALL\r\n\r\n")
    await writer.drain()


@pytest.mark.parametrize(("failure", "failures"), [
    # reset before any answer; aiohttp itself resends once on a reused keep-alive connection
    (_close_at_once, 2),
    (_truncate_body, 1),   # body shorter than its content-length
    (_garbage, 1),         # not HTTP
], ids=["reset-without-answer", "truncated-body", "malformed-http"])
async def test_broken_answers_are_mapped_and_retried(failure, failures: int) -> None:
    client = await _fails_then_works(failure, failures)
    assert client.stats.transport_errors == 1 and client.stats.retries == 1


async def test_mapping_of_aiohttp_errors_to_httpx() -> None:
    key = aiohttp.client_reqrep.ConnectionKey("h", 443, True, True, None, None, None)
    dns = aiohttp.ClientConnectorDNSError(key, OSError(-2, "Name or service not known"))
    temporary = aiohttp.ClientConnectorDNSError(key, OSError(-3, "Temporary failure"))
    refused = aiohttp.ClientConnectorError(key, ConnectionRefusedError(111, "refused"))
    cases = {
        dns: NameResolutionError,
        temporary: httpx.ConnectError,
        refused: httpx.ConnectError,
        aiohttp.ConnectionTimeoutError("connect"): httpx.ConnectTimeout,
        aiohttp.SocketTimeoutError("read"): httpx.ReadTimeout,
        aiohttp.ServerDisconnectedError(): httpx.RemoteProtocolError,
        aiohttp.ClientPayloadError("short"): httpx.RemoteProtocolError,
        aiohttp.ClientOSError(104, "Connection reset by peer"): httpx.ReadError,
        aiohttp.InvalidURL("nope"): httpx.UnsupportedProtocol,
        ssl.SSLCertVerificationError("self-signed"): CertificateError,
    }
    for exc, kind in cases.items():
        assert type(map_error(exc)) is kind, exc
    assert not isinstance(map_error(temporary), NameResolutionError)


async def test_connection_refused_is_retried_then_fails() -> None:
    async with RawServer(lambda *a: asyncio.sleep(0, False)) as server:
        url = server.url
    async with _client(url) as client:  # the server is gone: nothing listens there
        with pytest.raises(RequestFailedError) as info:
            await client.company(NS, "c-1")
    assert info.value.attempts == 3 and info.value.last_error == "ConnectError"


async def test_a_server_that_accepts_and_never_answers_times_out_per_attempt() -> None:
    """httpx-aiohttp#21: aiohttp gets no overall timeout; the client bounds each attempt."""
    async def silent(path: bytes, n: int, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(30)
        return False

    async with RawServer(silent) as server, _client(server.url, request_timeout=0.3,
                                                    max_attempts=2) as client:
        started = time.monotonic()
        with pytest.raises(RequestFailedError) as info:
            await client.company(NS, "c-1")
        elapsed = time.monotonic() - started
    assert info.value.attempts == 2 and info.value.last_error == "ReadTimeout"
    assert 0.6 <= elapsed < 2.0


async def test_half_a_body_then_a_stall_times_out_per_attempt() -> None:
    """The body trickles in slower than request_timeout allows in all: the whole
    attempt is bounded, not only the gap between two reads."""
    async def trickle(path: bytes, n: int, writer: asyncio.StreamWriter) -> bool:
        if n <= 2:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n" % len(COMPANY))
            for byte in COMPANY[:15]:
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(0.1)  # each gap is shorter than the timeout
            await asyncio.sleep(30)
            return False
        writer.write(_answer(COMPANY))
        await writer.drain()
        return True

    async with RawServer(trickle) as server, _client(server.url, request_timeout=0.5,
                                                     max_attempts=3) as client:
        started = time.monotonic()
        company = await client.company(NS, "c-1")
        elapsed = time.monotonic() - started
    assert company.name == "Acme"
    assert client.stats.transport_errors == 2 and client.stats.retries == 2
    assert 1.0 <= elapsed < 3.0


async def test_a_name_that_does_not_resolve_fails_fast_and_names_the_url() -> None:
    started = time.monotonic()
    async with _client("https://no-such-host.invalid", max_attempts=6,
                       backoff_initial=1.0, backoff_max=8.0) as client:
        with pytest.raises(RequestFailedError) as info:
            await client.user_info()
    assert time.monotonic() - started < 5
    assert info.value.attempts == 1 and info.value.last_error == "NameResolutionError"
    assert "https://no-such-host.invalid/api/auth" in str(info.value)
    assert "check base_url" in str(info.value) and "\n" not in str(info.value)


async def test_html_answer_says_check_base_url_in_one_line() -> None:
    page = b"<!doctype html><html><body><h1>Welcome to nginx!</h1>\n<p>x</p></body></html>"

    async def html(path: bytes, n: int, writer: asyncio.StreamWriter) -> bool:
        status = "404 Not Found" if b"companies" in path else "200 OK"
        writer.write(_answer(page, status, b"text/html; charset=utf-8"))
        await writer.drain()
        return True

    async with RawServer(html) as server, _client(server.url) as client:
        with pytest.raises(ResponseFormatError) as not_found:
            await client.company(NS, "c-1")  # 404 as HTML: not the service's "not found"
        with pytest.raises(RequestFailedError) as ok_html:
            await client.user_info()
    for error in (not_found.value, ok_html.value):
        text = str(error)
        assert f"{server.url} answered text/html, not JSON: check base_url" in text, text
        assert "\n" not in text and "nginx" not in text
    assert not isinstance(not_found.value, NotFoundError)
    assert not_found.value.status_code == 404


# -- TLS ------------------------------------------------------------------------------


def _self_signed(tmp: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


async def _company_ok(path: bytes, n: int, writer: asyncio.StreamWriter) -> bool:
    writer.write(_answer(COMPANY))
    await writer.drain()
    return True


async def test_tls_is_verified_and_a_ca_bundle_is_honoured(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    async with RawServer(_company_ok, ssl_context=context) as server:
        # default trust store: the self-signed certificate is refused, at once
        async with _client(server.url, max_attempts=5) as client:
            with pytest.raises(RequestFailedError) as info:
                await client.company(NS, "c-1")
        assert info.value.attempts == 1 and info.value.last_error == "CertificateError"
        assert "set ca_bundle" in str(info.value)
        # with the certificate as CA bundle, it works
        async with _client(server.url, ca_bundle=str(cert)) as client:
            assert (await client.company(NS, "c-1")).name == "Acme"
        # verify_tls=False accepts it too
        async with _client(server.url, verify_tls=False) as client:
            assert (await client.company(NS, "c-1")).name == "Acme"
    with pytest.raises(ConfigurationError):
        _client(server.url, ca_bundle=str(tmp_path / "missing.pem"))


# -- size and nesting caps ----------------------------------------------------------


async def test_an_answer_over_max_response_bytes_is_refused_without_retries() -> None:
    big = b'{"id": "c-1", "name": "' + b"x" * 5000 + b'"}'

    async def serve(path: bytes, n: int, writer: asyncio.StreamWriter) -> bool:
        if b"c-2" in path:  # no content-length: chunked, counted while read
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"transfer-encoding: chunked\r\n\r\n")
            for start in range(0, len(big), 1000):
                part = big[start:start + 1000]
                writer.write(b"%x\r\n%s\r\n" % (len(part), part))
            writer.write(b"0\r\n\r\n")
        else:
            writer.write(_answer(big))
        await writer.drain()
        return True

    async with RawServer(serve) as server, _client(server.url, max_response_bytes=4096,
                                                   max_attempts=4) as client:
        for company in ("c-1", "c-2"):
            with pytest.raises(RequestFailedError) as info:
                await client.company(NS, company)
            assert info.value.attempts == 1 and info.value.last_error == "ResponseTooLarge"
            assert "max_response_bytes (4096)" in str(info.value)
        assert server.requests == 2
    async with RawServer(serve) as server, _client(server.url) as client:
        assert (await client.company(NS, "c-1")).name == "x" * 5000  # the default is generous


async def test_json_nested_deeper_than_sane_is_refused() -> None:
    deep = b'{"id": "c-1", "name": "A", "extra": ' + b"[" * 200 + b"]" * 200 + b"}"
    very_deep = b'{"id": "c-1", "extra": ' + b"[" * 5000 + b"]" * 5000 + b"}"

    async def serve(path: bytes, n: int, writer: asyncio.StreamWriter) -> bool:
        writer.write(_answer(very_deep if b"c-2" in path else deep))
        await writer.drain()
        return True

    async with RawServer(serve) as server, _client(server.url) as client:
        for company in ("c-1", "c-2"):
            with pytest.raises(ResponseFormatError, match="nested deeper than 64 levels"):
                await client.company(NS, company)
        assert server.requests == 2  # refused at once, not retried
