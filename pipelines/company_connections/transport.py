"""httpx's transport seam on aiohttp's engine: the client's default transport.

`AiohttpTransport` is an `httpx.AsyncBaseTransport`: it takes an `httpx.Request`
and returns an `httpx.Response` whose body streams from an aiohttp response, so
the client (and tests, with `httpx.MockTransport`) speak httpx only. aiohttp's
connection pool costs about a third of httpcore's CPU per request.

One `aiohttp.ClientSession` per transport, opened on the first request (inside the
running loop), with at most `max_connections` connections (the client passes
`max_concurrency`). Connect and socket-read timeouts are set on the session; the
client bounds each whole attempt (answer and body) itself, since aiohttp's timeouts
are per read, not per request.

Every aiohttp failure is mapped to the httpx exception a stock httpx client raises
for the same event, so the client's retry rules apply unchanged:

=========================================  ====================================
aiohttp                                    httpx
=========================================  ====================================
name does not resolve (EAI_NONAME)         `NameResolutionError` (a ConnectError)
other DNS failure (EAI_AGAIN, ...)         ConnectError
certificate not trusted                    `CertificateError` (a ConnectError)
other TLS handshake failure                ConnectError
connection refused, unreachable            ConnectError
connect timeout                            ConnectTimeout
read timeout                               ReadTimeout
server closed without an answer            RemoteProtocolError
body shorter than announced (truncated)    RemoteProtocolError
connection reset, other socket errors      ReadError
malformed HTTP                             RemoteProtocolError
invalid or non-http URL                    UnsupportedProtocol
=========================================  ====================================

The original aiohttp exception is kept as ``__cause__``.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import urllib.request
from collections.abc import AsyncIterator

import aiohttp
import httpx
from yarl import URL

__all__ = ["AiohttpTransport", "CertificateError", "NameResolutionError", "map_error"]

_PERMANENT_DNS_ERRNOS = frozenset(
    code for code in (getattr(socket, "EAI_NONAME", None), getattr(socket, "EAI_NODATA", None))
    if code is not None
)
_HTTP_VERSION = {"http_version": b"HTTP/1.1"}


class NameResolutionError(httpx.ConnectError):
    """The host name does not resolve: a permanent failure, not worth retrying."""


class CertificateError(httpx.ConnectError):
    """The server's TLS certificate is not trusted (not retried: set ca_bundle)."""


def map_error(exc: BaseException) -> httpx.TransportError:
    """The httpx exception for an aiohttp (or asyncio timeout) exception."""
    message = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ClientConnectorError):
        # aiohttp's own text carries the repr of the TLS context ("ssl:<ssl.SSLContext
        # object at 0x...>"): say which host could not be reached, and why
        cause = exc.certificate_error if isinstance(exc, aiohttp.ClientConnectorCertificateError) else exc.os_error
        reason = getattr(cause, "strerror", None) or str(cause) or type(cause).__name__
        message = f"cannot connect to {exc.host}:{exc.port}: {reason}"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        errno = getattr(exc.os_error, "errno", None)
        kind: type[httpx.TransportError] = (
            NameResolutionError if errno in _PERMANENT_DNS_ERRNOS else httpx.ConnectError)
    elif isinstance(exc, aiohttp.ClientConnectorCertificateError | ssl.SSLCertVerificationError):
        kind = CertificateError
    elif isinstance(exc, aiohttp.ClientSSLError | ssl.SSLError):
        kind = httpx.ConnectError
    elif isinstance(exc, aiohttp.ConnectionTimeoutError):
        kind = httpx.ConnectTimeout
    elif isinstance(exc, aiohttp.ClientConnectorError):
        kind = httpx.ConnectError
    elif isinstance(exc, aiohttp.ServerTimeoutError | asyncio.TimeoutError):
        kind = httpx.ReadTimeout
    elif isinstance(exc, aiohttp.ServerDisconnectedError):
        kind = httpx.RemoteProtocolError
        message = "the server closed the connection without sending a complete response"
    elif isinstance(exc, aiohttp.ClientPayloadError):
        kind = httpx.RemoteProtocolError
        message = f"incomplete body: {message}"
    elif isinstance(exc, aiohttp.InvalidURL):
        kind = httpx.UnsupportedProtocol
    elif isinstance(exc, aiohttp.ClientResponseError):
        kind = httpx.RemoteProtocolError
    elif isinstance(exc, aiohttp.ClientError | OSError):
        kind = httpx.ReadError
    else:
        kind = httpx.TransportError
    return kind(message)


class _Body(httpx.AsyncByteStream):
    """The body of an aiohttp response, chunk by chunk as it arrives."""

    __slots__ = ("_response",)

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self._response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        content = self._response.content
        try:
            while chunk := await content.readany():
                yield chunk
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            raise map_error(exc) from exc

    async def aclose(self) -> None:
        self._response.release()


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An httpx transport sending requests through one pooled aiohttp session.

    `verify`: True (certifi's CAs, as httpx), False, or an `ssl.SSLContext` (for
    example one built from a ``ca_bundle``); the default context is built on the
    first https request only. `timeout` bounds connecting and each socket read, in
    seconds. `trust_env` honours the proxy variables (``HTTPS_PROXY``, ``NO_PROXY``...)
    as httpx does; they are read once, not per request as aiohttp's own
    ``trust_env`` does (in a thread, with ``~/.netrc``).
    """

    def __init__(self, *, verify: ssl.SSLContext | bool = True, max_connections: int = 100,
                 timeout: float | None = 30.0, keepalive_expiry: float = 15.0,
                 trust_env: bool = True) -> None:
        self._verify = verify
        self._ssl: ssl.SSLContext | bool | None = verify if isinstance(verify, ssl.SSLContext) \
            else None if verify else False
        self._max_connections = max_connections
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout)
        self._keepalive = keepalive_expiry
        self._proxies = urllib.request.getproxies() if trust_env else {}
        self._proxy_for: dict[tuple[str, str], str | None] = {}
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(limit=self._max_connections,
                                         keepalive_timeout=self._keepalive)
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=self._timeout, auto_decompress=False,
            skip_auto_headers=("User-Agent",), cookie_jar=aiohttp.DummyCookieJar())
        return self._session

    def _tls(self) -> ssl.SSLContext | bool:
        if self._ssl is None:
            self._ssl = httpx.create_ssl_context(verify=True)
        return self._ssl

    def _proxy(self, scheme: str, host: str) -> str | None:
        key = (scheme, host)
        if key not in self._proxy_for:
            proxy = self._proxies.get(scheme) or self._proxies.get("all")
            if proxy and urllib.request.proxy_bypass_environment(host, self._proxies):
                proxy = None
            self._proxy_for[key] = proxy
        return self._proxy_for[key]

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._session or self._open()
        url = request.url
        options: dict[str, object] = {}
        if url.scheme == "https":
            options["ssl"] = self._tls()
        if self._proxies and (proxy := self._proxy(url.scheme, url.host)):
            options["proxy"] = proxy
        # built with their content in memory, except httpx's redirects (a stream to read)
        body = (await request.aread()) or None
        try:
            response = await session.request(
                request.method, URL(str(url), encoded=True), headers=request.headers.multi_items(),
                data=body, allow_redirects=False, **options)
        except (aiohttp.ClientError, OSError, asyncio.TimeoutError) as exc:
            raise map_error(exc) from exc
        return httpx.Response(response.status, headers=response.raw_headers, stream=_Body(response),
                              request=request, extensions=_HTTP_VERSION)

    async def aclose(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()
