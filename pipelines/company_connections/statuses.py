"""What an answer's status, or a transport failure, makes of one attempt.

`ServiceClient.status_rules` is a :class:`StatusRules`: the client's module docstring,
step 6, written out once, for API requests and document downloads alike:

* 2xx: the attempt succeeded;
* 408, 429 and 5xx: `Retryable`, waiting at least the ``Retry-After`` of a 429 or 503;
  one longer than `max_retry_after` is `final` (the request fails at once);
* 404 in HTML: `ResponseFormatError` "... answered text/html, not JSON: check base_url";
* 401, 403, 404 and other 4xx: `AuthenticationError`, `DeniedError`, `NotFoundError`,
  `BadRequestError` at once; an authoritative 403/404 is kept as evidence first;
* transport errors: `Retryable`, `final` for a host name that does not resolve and an
  untrusted certificate (naming the URL and what to check).

Every message is redacted of the client's secrets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import NoReturn

import httpx

from . import settings as s
from .errors import (
    AuthenticationError,
    BadRequestError,
    DeniedError,
    NotFoundError,
    ResponseFormatError,
    ServiceError,
    redact,
)
from .evidence import Answer, EvidenceLog, set_answer
from .responses import is_html, response_text, retry_after
from .retries import Retryable
from .stats import RequestStats
from .transport import CertificateError, NameResolutionError

__all__ = ["TRANSPORT_ERRORS", "StatusRules"]

logger = logging.getLogger("diligence.client")

#: What the transport raises for a failed attempt (see :mod:`.transport`): retried.
TRANSPORT_ERRORS = (httpx.TransportError, httpx.DecodingError)


def _is_auth(path: str) -> bool:
    """Whether `path` is login or token renewal (endpoints 1, 2), whose answers carry a
    token and are never kept as evidence."""
    return path.rstrip("/").endswith((s.LOGIN_PATH.rstrip("/"), s.RENEW_TOKEN_PATH.rstrip("/")))


def _where(response: httpx.Response, path: str) -> str:
    """The path and query a response answered (the manifest's key); `path` when the
    response does not carry its request (a mock transport's)."""
    try:
        return response.request.url.raw_path.decode("ascii")
    except RuntimeError:
        return path


class StatusRules:
    """The status rules of one client (see the module docstring).

    `base_url` names the service in the error of an HTML answer; `stats` counts the
    transport errors; `evidence` keeps the authoritative 403/404 answers (None: not
    kept); `secrets` gives the values no message may show.
    """

    def __init__(self, base_url: str, max_retry_after: float, stats: RequestStats,
                 evidence: EvidenceLog | None, secrets: Callable[[], list[str | None]]) -> None:
        self._base = base_url
        self._max_retry_after = max_retry_after
        self._stats = stats
        self._evidence = evidence
        self._secrets = secrets

    def honoured_retry_after(self, response: httpx.Response) -> float | None:
        """The pause a 429's ``Retry-After`` asks of every request (None: none asked).
        One beyond `max_retry_after` is not honoured at all: that request fails at once
        (:meth:`check`), and the others go on, each failing as soon as it is told
        the same, rather than all waiting `max_retry_after` first."""
        wait = retry_after(response)
        return wait if wait is not None and wait <= self._max_retry_after else None

    def check(self, response: httpx.Response, method: str, path: str,
              namespace: str | None) -> None:
        """Return on a 2xx; else raise what the status makes of the attempt: `Retryable`
        or a `ServiceError` (an authoritative 403/404 is kept as evidence first)."""
        code = response.status_code
        if 200 <= code < 300:
            return
        if code in s.RETRYABLE_STATUS_CODES or code >= 500:
            wait = retry_after(response) if code in s.RETRY_AFTER_STATUS_CODES else None
            if wait is not None and wait > self._max_retry_after:
                raise Retryable(f"HTTP {code}", f"the service asked to wait {wait:.0f} s "
                                f"(Retry-After), more than max_retry_after "
                                f"({self._max_retry_after:g} s)", status_code=code, final=True)
            raise Retryable(f"HTTP {code}", redact(response_text(response), self._secrets()),
                            status_code=code, retry_after=wait)
        if code == 404 and is_html(response):
            raise self.html_error(response, method, path, namespace)
        kind: type[ServiceError] = {401: AuthenticationError, 403: DeniedError,
                                    404: NotFoundError}.get(code, BadRequestError)
        if code in (403, 404) and self._evidence is not None and not _is_auth(path):  # evidence too
            sha = self._evidence.record(method, _where(response, path), namespace, code,
                                        response.content)
            set_answer(Answer((sha,)))
        raise self.error(kind, response, method, path, namespace, "")

    def error(self, kind: type[ServiceError], response: httpx.Response, method: str, path: str,
              namespace: str | None, prefix: str) -> ServiceError:
        """A `kind` error of `response`: `prefix`, then the body's text (redacted)."""
        text = response_text(response)
        message = f"{prefix}: {text}" if prefix and text else prefix or text
        return kind(message, method=method, path=path, namespace=namespace,
                    status_code=response.status_code, secrets=self._secrets())

    def html_error(self, response: httpx.Response, method: str, path: str,
                   namespace: str | None) -> ResponseFormatError:
        """The error of an HTML page where JSON was expected: most likely a wrong base_url."""
        return ResponseFormatError(f"{self._base} answered text/html, not JSON: check base_url",
                                   method=method, path=path, namespace=namespace,
                                   status_code=response.status_code)

    def transport_failed(self, method: str, path: str, attempt: int, exc: Exception,
                         url: httpx.URL) -> NoReturn:
        """Count and log a transport error of an attempt at `url`, and raise it as
        `Retryable` (`final` when retrying cannot help)."""
        self._stats.transport_errors += 1
        logger.debug("%s %s -> %s (attempt %d)", method, path, type(exc).__name__, attempt)
        where = f"{url.scheme}://{url.netloc.decode('ascii', 'replace')}{path}"
        if isinstance(exc, NameResolutionError):
            raise Retryable(type(exc).__name__, f"the host name of {where} does not resolve "
                             f"({redact(str(exc), self._secrets())}): check base_url",
                             cause=exc, final=True) from None
        if isinstance(exc, CertificateError):
            raise Retryable(type(exc).__name__, f"the TLS certificate of {where} is not trusted "
                             f"({redact(str(exc), self._secrets())}): set ca_bundle",
                             cause=exc, final=True) from None
        raise Retryable(type(exc).__name__, redact(str(exc), self._secrets()), cause=exc) from None
