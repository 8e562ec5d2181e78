"""Document downloads (endpoint 11's signed URLs): their HTTP client, one attempt at a time.

The client opens one :func:`download_client` beside its API transport (the same
transport, so the same connection pool). `ServiceClient.download` checks the URL
(`urls.checked_download_url`) and runs `download_once` under the client's
`RetryPolicy`, like any request. One attempt:

* holds a concurrency slot; waits for the rate limit only when the URL is on the
  service's own origin (a storage host is not the service), and reports 429s there;
* sends no Authorization header, accepts anything, follows redirects, each request
  (the first and every redirect) checked by the download client: the http(s) rules of
  `checked_download_url`, then a public address (:mod:`.addresses`); a URL that
  redirects in a loop fails that download at once (`Retryable`, final);
* refuses a body over `max_download_bytes`, announced or counted while streaming,
  after decoding under the cap (:mod:`.inflate`: no decompression bomb) (`Retryable`, final);
* streams to ``.<name>.<random>.part`` beside `dest` while hashing (SHA-256), then
  renames it over `dest`; the part file never stays behind. The part file is created
  new (``O_EXCL | O_NOFOLLOW``) and the rename replaces a symlink at `dest` rather
  than writing through it, so no symlink in the folder is ever followed.

An attempt uses only public members of its client (:class:`DownloadingClient`); its
statuses and transport errors go through the client's own rules
(:class:`~.statuses.StatusRules`), so a download fails and retries exactly as an API
request.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import secrets
import ssl
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

import httpx

from . import settings as s
from .addresses import check_download_address
from .inflate import BodyTooLarge, bounded_bytes
from .limits import AdaptiveThrottle
from .retries import Retryable
from .stats import RequestStats
from .statuses import TRANSPORT_ERRORS, StatusRules
from .urls import checked_download_url

__all__ = ["DownloadResult", "DownloadingClient", "download_client", "download_once"]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True)
class DownloadResult:
    """A downloaded document: where it is, its size in bytes and its SHA-256."""

    path: pathlib.Path
    size: int
    sha256: str
    content_type: str | None


class DownloadingClient(Protocol):
    """What a download uses of its client (a :class:`~.client.ServiceClient`)."""

    throttle: AdaptiveThrottle
    stats: RequestStats
    status_rules: StatusRules

    @property
    def http(self) -> httpx.AsyncClient:
        """The open :func:`download_client`."""

    @property
    def max_download_bytes(self) -> int:
        """The size cap of a document."""

    def slot(self) -> AbstractAsyncContextManager[None]:
        """One of the client's concurrency slots, held while the download runs."""


def download_client(transport: httpx.AsyncBaseTransport, *, verify: ssl.SSLContext | bool, timeout: float,
                    limits: httpx.Limits, user_agent: str, allow_insecure_http: bool,
                    allow_private: bool, allow_loopback: bool) -> httpx.AsyncClient:
    """The `httpx.AsyncClient` of downloads on `transport`, which checks every request
    before it goes out (redirects too): the http(s) rules of `checked_download_url`,
    then a public address (`allow_private`, `allow_loopback`: see :mod:`.addresses`)."""

    async def check(request: httpx.Request) -> None:
        target = checked_download_url(str(request.url), allow_insecure_http)
        await check_download_address(target, allow_private=allow_private,
                                     allow_loopback=allow_loopback)

    return httpx.AsyncClient(
        transport=transport,
        verify=verify,
        timeout=httpx.Timeout(timeout),
        limits=limits,
        headers={"User-Agent": user_agent, s.ACCEPT_HEADER: "application/json"},
        follow_redirects=False,
        event_hooks={"request": [check]},
    )


async def download_once(client: DownloadingClient, url: httpx.URL, path: str,
                        dest: pathlib.Path, limited: bool, attempt: int) -> DownloadResult:
    """One attempt of `ServiceClient.download`: stream `url` to a part file beside
    `dest`, then rename it over `dest`. Failures raise `Retryable` or a `ServiceError`."""
    http = client.http
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(6)}.part")
    cap = client.max_download_bytes
    rules = client.status_rules
    try:
        async with client.slot():
            if limited:
                await client.throttle.wait_turn()
            sent_at = client.throttle.now()
            client.stats.requests_sent += 1
            try:
                async with http.stream("GET", url, headers={s.ACCEPT_HEADER: "*/*"},
                                       follow_redirects=True) as response:
                    if limited:
                        client.throttle.record(response.status_code, sent_at,
                                               rules.honoured_retry_after(response))
                    if response.status_code >= 300:
                        await response.aread()
                        client.stats.count_response("GET", path, attempt, response.status_code, 0)
                        rules.check(response, "GET", path, None)
                    length = response.headers.get("content-length")
                    if length is not None and length.isdigit() and int(length) > cap:
                        raise _too_large(cap, int(length))
                    digest, size = hashlib.sha256(), 0
                    # owner-only from the first byte: documents are confidential; a new
                    # file only, never through a symlink or over one placed there
                    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
                    with os.fdopen(fd, "wb") as handle:
                        try:
                            async for chunk in bounded_bytes(response, cap):
                                size += len(chunk)
                                handle.write(chunk)
                                digest.update(chunk)
                        except BodyTooLarge as exc:
                            raise _too_large(cap, exc.size) from None
                    content_type = response.headers.get("content-type")
                    status = response.status_code
            except TRANSPORT_ERRORS as exc:
                rules.transport_failed("GET", path, attempt, exc, url)
            except httpx.TooManyRedirects:
                raise Retryable("TooManyRedirects", "the document's URL redirects in a loop (or "
                                "more than 20 times); refused", final=True) from None
        client.stats.count_response("GET", path, attempt, status, size)
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return DownloadResult(path=dest, size=size, sha256=digest.hexdigest(), content_type=content_type)


def _too_large(cap: int, size: int) -> Retryable:
    return Retryable("ResponseTooLarge", f"the document ({size} bytes or more) is larger than "
                     f"max_download_bytes ({cap}); refused", final=True)
