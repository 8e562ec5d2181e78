"""Exceptions raised by the service client.

The tree::

    SourceError                    base of everything the source and its client raise on purpose
    ├── ConfigurationError         bad settings (base_url, credentials, TLS); raised before any request
    ├── UnknownNamespaceError      a namespace asked for that user-info does not list and no
    │                              sync ever loaded (a mistyped id); nothing is read or recorded
    └── ServiceError               a request to the service (or a download) did not succeed
        ├── AuthenticationError    login rejected; 401s that re-logins could not fix; the
        │                          re-login budget exhausted (a token storm)
        ├── DeniedError            403: authoritative, not retried
        ├── NotFoundError          404: authoritative, not retried
        ├── BadRequestError        400 or another non-retryable status (other 4xx, 3xx); not retried
        ├── RequestFailedError     still failing after every attempt (5xx, 429, timeouts,
        │                          connection errors, malformed bodies), or failed for good
        │                          at once (host name not resolving, certificate not
        │                          trusted, body over the size cap); carries `.attempts`
        ├── ResponseFormatError    a body that cannot be used: unparseable JSON, missing keys,
        │                          a pagination loop, JSON nested too deep, an HTML 404
        │                          page; the cause of a RequestFailedError when the last
        │                          attempt failed that way
        └── StalledError           no request completed for `stall_timeout` seconds; says
                                   what the client was waiting for

`DeniedError` and `NotFoundError` are the service's answer; every other
`ServiceError` means "this could not be read" and must never be taken as absence.

Every `ServiceError` carries `.method`, `.path` (no query string), `.namespace`,
`.status_code` (None when no response came) and `.message` (at most
``MESSAGE_MAX_CHARS`` characters of response text or exception text). Messages are
passed through `redact` (:mod:`pipelines.secrets`) before they are stored, so str(), repr() and log lines
never contain a password, a token or an Authorization header value.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..secrets import redact
from .settings import MESSAGE_MAX_CHARS

__all__ = [
    "StalledError",
    "AuthenticationError",
    "UnknownNamespaceError",
    "BadRequestError",
    "ConfigurationError",
    "DeniedError",
    "NotFoundError",
    "RequestFailedError",
    "ResponseFormatError",
    "ServiceError",
    "SourceError",
    "redact",
]

def trim(text: str, limit: int = MESSAGE_MAX_CHARS) -> str:
    """Collapse whitespace and cut `text` to `limit` characters (with an ellipsis)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class SourceError(Exception):
    """Base class of every exception this package raises on purpose.

    A root of its own, because ``pipelines/`` imports nothing of the rest of the
    project; the ``diligence`` CLI maps it next to the root of its own errors.
    `transient` says whether another attempt may succeed: only a request that still
    failed after its retries may (401, 403, 404, 400 and bad settings fail the same).
    """

    transient: bool = False


class ConfigurationError(SourceError):
    """The client was configured in a way that cannot work or is unsafe."""


class UnknownNamespaceError(SourceError):
    """Namespaces were asked for that user-info does not list and that no sync of this
    warehouse ever loaded: mistyped ids, not companies that lost access. The sync reads
    nothing and records nothing of them; the message lists the namespaces user-info has."""

    def __init__(self, unknown: list[str], available: list[str]) -> None:
        self.unknown = list(unknown)
        self.available = list(available)
        names = ", ".join(repr(ns) for ns in self.unknown)
        some = "namespace" if len(self.unknown) == 1 else "namespaces"
        super().__init__(
            f"unknown {some} {names}: not one of the user's companies and never synced "
            f"into this warehouse; user-info lists: {', '.join(self.available) or 'none'}"
        )


class ServiceError(SourceError):
    """A request to the service did not give a usable answer.

    Attributes: `method`, `path` (without query), `namespace` (company id or None),
    `status_code` (None if no response arrived), `message` (trimmed, redacted).
    """

    def __init__(
        self,
        message: str,
        *,
        method: str,
        path: str,
        namespace: str | None = None,
        status_code: int | None = None,
        secrets: Iterable[str | None] = (),
    ) -> None:
        self.method = method
        self.path = path.split("?", 1)[0]
        self.namespace = namespace
        self.status_code = status_code
        self.message = trim(redact(message, secrets))
        super().__init__(self._describe())

    def _describe(self) -> str:
        where = f"{self.method} {self.path}"
        if self.namespace:
            where += f" [namespace {self.namespace}]"
        status = f"HTTP {self.status_code}" if self.status_code is not None else "no response"
        text = f"{where}: {status}"
        return f"{text}: {self.message}" if self.message else text

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.__dict__.copy()))


def _rebuild(cls: type[ServiceError], state: dict[str, object]) -> ServiceError:
    error = cls.__new__(cls)
    error.__dict__.update(state)
    Exception.__init__(error, error._describe())
    return error


class AuthenticationError(ServiceError):
    """Login was rejected, a request's 401s persisted after re-logins, or the run's
    re-login budget is exhausted."""


class DeniedError(ServiceError):
    """The service answered 403: the caller may not read this resource."""


class NotFoundError(ServiceError):
    """The service answered 404: the resource does not exist for this caller."""


class BadRequestError(ServiceError):
    """The service answered 400, another non-retryable 4xx, or an unexpected status."""


class ResponseFormatError(ServiceError):
    """The response body could not be parsed or lacks required keys, or paging looped."""


class RequestFailedError(ServiceError):
    """The request still failed after all attempts.

    `last_error` is ``"HTTP <status>"`` or the name of the last exception (for
    example ``"ReadTimeout"`` or ``"ResponseFormatError"``); `attempts` is how many
    attempts were made.
    """

    transient = True

    def __init__(
        self,
        message: str,
        *,
        method: str,
        path: str,
        namespace: str | None = None,
        status_code: int | None = None,
        attempts: int,
        last_error: str,
        secrets: Iterable[str | None] = (),
    ) -> None:
        self.attempts = attempts
        self.last_error = last_error
        super().__init__(
            message,
            method=method,
            path=path,
            namespace=namespace,
            status_code=status_code,
            secrets=secrets,
        )

    def _describe(self) -> str:
        where = f"{self.method} {self.path}"
        if self.namespace:
            where += f" [namespace {self.namespace}]"
        text = f"{where} failed after {self.attempts} attempt(s); last error: {self.last_error}"
        return f"{text}: {self.message}" if self.message else text


class StalledError(ServiceError):
    """No request completed for `stall_timeout` seconds (of a namespace, or of the run
    before any namespace is read); the message says what the client waited for."""

    def __init__(self, message: str, *, namespace: str | None = None) -> None:
        super().__init__(message, method="", path="", namespace=namespace)

    def _describe(self) -> str:
        return f"namespace {self.namespace}: {self.message}" if self.namespace else self.message

