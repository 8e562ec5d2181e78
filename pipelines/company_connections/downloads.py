"""Document downloads (endpoint 11's signed URLs), one attempt at a time.

`ServiceClient.download` checks the URL (`urls.checked_download_url`) and runs
`download_once` under the client's `RetryPolicy`, like any request. One attempt:

* holds a concurrency slot; waits for the rate limit only when the URL is on the
  service's own origin (a storage host is not the service), and reports 429s there;
* sends no Authorization header, accepts anything, follows redirects (through the
  client's `httpx.AsyncClient`, on the same transport); a URL that redirects in a loop
  fails that download at once (`Retryable`, final);
* refuses a body over `max_download_bytes`, announced or counted while streaming,
  after decoding under the cap (:mod:`.inflate`: no decompression bomb) (`Retryable`, final);
* streams to ``.<name>.<random>.part`` beside `dest` while hashing (SHA-256), then
  renames it over `dest`; the part file never stays behind. The part file is created
  new (``O_EXCL | O_NOFOLLOW``) and the rename replaces a symlink at `dest` rather
  than writing through it, so no symlink in the folder is ever followed.

Statuses and transport errors go through the client's own rules (`_check_status`,
`_transport_failed`), so a download fails and retries exactly as an API request.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

from . import settings as s
from .errors import ConfigurationError
from .inflate import BodyTooLarge, bounded_bytes
from .retries import Retryable

if TYPE_CHECKING:
    from .client import ServiceClient

__all__ = ["DownloadResult", "download_once"]

TRANSPORT_ERRORS = (httpx.TransportError, httpx.DecodingError)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


@dataclass(frozen=True)
class DownloadResult:
    """A downloaded document: where it is, its size in bytes and its SHA-256."""

    path: pathlib.Path
    size: int
    sha256: str
    content_type: str | None


async def download_once(client: ServiceClient, url: httpx.URL, path: str, dest: pathlib.Path,
                        limited: bool, attempt: int) -> DownloadResult:
    """One attempt of `ServiceClient.download`: stream `url` to a part file beside
    `dest`, then rename it over `dest`. Failures raise `Retryable` or a `ServiceError`."""
    if client._http is None:
        raise ConfigurationError("use the client inside 'async with ServiceClient(...)'")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{secrets.token_hex(6)}.part")
    cap = client._max_download_bytes
    try:
        async with client._slots.slot():
            if limited:
                await client.throttle.wait_turn()
            sent_at = client.throttle.now()
            client.stats.requests_sent += 1
            try:
                async with client._http.stream("GET", url, headers={s.ACCEPT_HEADER: "*/*"},
                                               follow_redirects=True) as response:
                    if limited:
                        client.throttle.record(response.status_code, sent_at,
                                               client._honoured_retry_after(response))
                    if response.status_code >= 300:
                        await response.aread()
                        client._count_response("GET", path, attempt, response.status_code, 0)
                        client._check_status(response, "GET", path, None)
                    length = response.headers.get("content-length")
                    if length is not None and length.isdigit() and int(length) > cap:
                        raise _too_large(client, int(length))
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
                            raise _too_large(client, exc.size) from None
                    content_type = response.headers.get("content-type")
                    status = response.status_code
            except TRANSPORT_ERRORS as exc:
                client._transport_failed("GET", path, attempt, exc, url)
            except httpx.TooManyRedirects:
                raise Retryable("TooManyRedirects", "the document's URL redirects in a loop (or "
                                "more than 20 times); refused", final=True) from None
        client._count_response("GET", path, attempt, status, size)
        os.replace(tmp, dest)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    return DownloadResult(path=dest, size=size, sha256=digest.hexdigest(), content_type=content_type)


def _too_large(client: ServiceClient, size: int) -> Retryable:
    return Retryable("ResponseTooLarge", f"the document ({size} bytes or more) is larger than "
                     f"max_download_bytes ({client._max_download_bytes}); refused", final=True)
