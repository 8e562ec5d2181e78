"""Tokens: login, renewal before expiry, recovery after a 401, and persistence.

`TokenManager` holds the one current JWT of a run. It does no HTTP itself: the
client gives it two coroutines, `login()` (endpoint 1) and `renew(token)` (endpoint
2), which raise `AuthenticationError` when the service answers 401/403.

Rules (the service invalidates a token when it is renewed):

- `get()` returns the current token, logging in first if there is none and renewing
  first if it is within its renewal margin. Login and renewal are single-flight
  behind one `asyncio.Lock`: many concurrent callers cause exactly one request.
- The renewal margin is ``min(renew_margin_seconds, 25 % of the token's lifetime)``,
  so a 7-day token renews an hour before expiry and a 4-second token one second
  before, not constantly. The lifetime is ``exp - iat`` (or ``exp - now`` without
  ``iat``); a token without a readable ``exp`` is assumed to last 7 days.
- The client reports every answer to a request sent with a token (`accepted`): a
  401 on a token the service took before is a revocation, followed as far as
  `relogin_budget` allows; a 401 on a token it never took, again and again, means
  logging in does not help (the client gives up on that request).
- `recover(rejected)` is called after a 401. If `rejected` is no longer current it
  does nothing (the caller just retries with the current token). Otherwise `get()`
  stops handing `rejected` out (requests about to be sent wait for its successor,
  so one revocation costs only the 401s of requests already in flight) and it logs
  in again when a password is available; in token-only mode it tries one renewal
  and, if that is rejected too, raises `AuthenticationError`.
- Re-logins (or renewals in token-only mode) caused by 401s are bounded by
  `relogin_budget` per manager (per run): a service that keeps revoking tokens (a
  token storm) is followed that far, then `recover` raises `AuthenticationError`
  saying the budget is exhausted.
- A scheduled renewal rejected with 401 falls back to a re-login when possible;
  one that fails otherwise (service errors after retries) keeps the still valid
  token and is tried again ``RENEW_RETRY_SECONDS`` later.
- With a `TokenStore`, every new token is saved at once, and on start a stored
  token is preferred when it is not expired and was issued later (``iat``) than the
  configured `access_token` (or when no token is configured).

Token values never appear in `repr`, messages or logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import jwt

from .errors import AuthenticationError, ConfigurationError, ServiceError
from .settings import (
    DEFAULT_RELOGIN_BUDGET,
    DEFAULT_RENEW_MARGIN_SECONDS,
    DEFAULT_TOKEN_LIFETIME_SECONDS,
    RENEW_MARGIN_FRACTION,
    RENEW_RETRY_SECONDS,
    RENEW_TOKEN_PATH,
)

__all__ = ["FileTokenStore", "TokenInfo", "TokenManager", "TokenStore", "token_info"]

logger = logging.getLogger("diligence.client")

TOKEN_ONLY_REJECTED = (
    "the access token was rejected; it may have been renewed elsewhere: "
    "set a fresh access_token or a password"
)


@runtime_checkable
class TokenStore(Protocol):
    """Where a renewed token is kept between runs."""

    def load(self) -> str | None:
        """Return the stored token, or None if there is none."""
        ...

    def save(self, token: str) -> None:
        """Store `token`, replacing any previous one."""
        ...


class FileTokenStore:
    """A `TokenStore` in one file, written atomically with mode 0600.

    `save` creates missing parent directories, writes a temporary file created
    with mode 0600 in the same directory, fsyncs it and renames it over the target.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"FileTokenStore({str(self.path)!r})"

    def load(self) -> str | None:
        """Return the file's token (stripped), or None if missing or empty."""
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return text or None

    def save(self, token: str) -> None:
        """Atomically replace the file's content with `token` (mode 0600)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = _create_private_temp(self.path.parent, self.path.name)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(token)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp_name, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp_name)
            raise


def _create_private_temp(directory: Path, name: str) -> tuple[int, str]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        tmp_name = os.path.join(directory, f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp_name, flags, 0o600)
        except FileExistsError:
            continue
        os.fchmod(fd, 0o600)
        return fd, tmp_name
    raise FileExistsError(f"could not create a temporary file in {directory}")


@dataclass(frozen=True)
class TokenInfo:
    """What the client knows about a token without verifying it."""

    issued_at: float | None
    expires_at: float | None


def token_info(token: str) -> TokenInfo:
    """Read ``iat`` and ``exp`` from a JWT payload without verifying the signature.

    Returns ``TokenInfo(None, None)`` for a token that is not a readable JWT.
    """
    try:
        claims = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return TokenInfo(None, None)

    def number(key: str) -> float | None:
        value = claims.get(key)
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None

    return TokenInfo(number("iat"), number("exp"))


class TokenManager:
    """The current token of a run, with single-flight login, renewal and recovery.

    `login` is None in token-only mode. `on_event` receives ``"login"``,
    ``"relogin"``, ``"renewal"`` and ``"stored_token"`` for statistics. `clock`
    returns the current Unix time.
    """

    def __init__(
        self,
        *,
        login: Callable[[], Awaitable[str]] | None,
        renew: Callable[[str], Awaitable[str]],
        access_token: str | None = None,
        store: TokenStore | None = None,
        renew_margin_seconds: float = DEFAULT_RENEW_MARGIN_SECONDS,
        on_event: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.time,
        relogin_budget: int = DEFAULT_RELOGIN_BUDGET,
    ) -> None:
        self._login = login
        self._renew = renew
        self._configured = access_token
        self._store = store
        self._renew_margin = max(0.0, renew_margin_seconds)
        self._on_event = on_event or (lambda event: None)
        self.clock = clock
        self._lock = asyncio.Lock()
        self._started = False
        self._token: str | None = None
        self._known: set[str] = set()
        self._current_accepted = False
        self._rejected: str | None = None  # the current token, once a 401 answered it
        self._accepted_before: set[str] = set()  # earlier tokens the service took
        self._expires_at = 0.0
        self._renew_at = 0.0
        self.relogin_budget = relogin_budget
        self.recoveries = 0

    def __repr__(self) -> str:
        mode = "token-only" if self.token_only else "password"
        state = "no token" if self._token is None else f"expires_at={self._expires_at:.0f}"
        return f"TokenManager({mode}, {state})"

    @property
    def token_only(self) -> bool:
        """True when there is no password, so a rejected token cannot be replaced by login."""
        return self._login is None

    @property
    def current(self) -> str | None:
        """The token requests are sent with now (None before the first request)."""
        return self._token

    @property
    def expires_at(self) -> float | None:
        """Unix time at which the current token expires (None before the first request)."""
        return self._expires_at if self._token is not None else None

    @property
    def renew_at(self) -> float | None:
        """Unix time from which the current token is renewed before use."""
        return self._renew_at if self._token is not None else None

    @property
    def known(self) -> frozenset[str]:
        """Every token this manager has held (kept so that messages can redact them)."""
        return frozenset(self._known)

    def accepted(self, token: str) -> None:
        """The service answered a request sent with `token` (anything but 401)."""
        if token == self._token:
            self._current_accepted = True

    def was_accepted(self, token: str) -> bool:
        """Did the service ever take `token`? (Known for the current and earlier tokens:
        a replaced token was taken unless it was replaced before its first answer.)"""
        if token == self._token:
            return self._current_accepted
        return token in self._accepted_before

    @property
    def renewing(self) -> bool:
        """True while a login or renewal is under way."""
        return self._lock.locked()

    def is_current(self, token: str) -> bool:
        """True if `token` is still the token requests are sent with."""
        return token == self._token

    async def get(self) -> str:
        """Return a usable token, logging in or renewing first (single-flight)."""
        token = self._token
        if token is not None and token != self._rejected and self.clock() < self._renew_at:
            return token
        async with self._lock:
            if not self._started:
                self._start()
            if self._token is None:
                await self._obtain_initial()
            elif self.clock() >= self._renew_at:
                await self._renew_or_relogin(scheduled=True)
            assert self._token is not None
            return self._token

    async def login(self) -> str:
        """Log in now (endpoint 1) and make the new token current."""
        if self._login is None:
            raise ConfigurationError("logging in needs an email and a password")
        async with self._lock:
            self._started = True
            self._set(await self._login(), "login")
            assert self._token is not None
            return self._token

    async def renew(self) -> str:
        """Renew the token now through endpoint 2 and return the new one.

        Concurrent calls cause one renewal: a caller that waited for another's
        renewal gets that result.
        """
        before = self._token
        async with self._lock:
            if not self._started:
                self._start()
            if self._token is None:
                await self._obtain_initial()
            elif self._token == before:
                await self._renew_or_relogin()
            assert self._token is not None
            return self._token

    async def recover(self, rejected: str) -> bool:
        """Handle a 401 received while sending `rejected` (see module docstring).

        Returns True if this call replaced the token (re-login or renewal), False
        if `rejected` had already been replaced and the caller should just retry.
        """
        async with self._lock:
            if rejected != self._token:
                return False
            if self.recoveries >= self.relogin_budget:
                raise AuthenticationError(
                    f"re-login budget exhausted: the service revoked this run's token "
                    f"{self.recoveries} times; raise relogin_budget if its tokens are "
                    f"expected to be revoked that often",
                    method="GET", path=RENEW_TOKEN_PATH, status_code=401)
            self.recoveries += 1
            self._rejected = rejected  # requests about to go out wait for its successor
            if self._login is not None:
                logger.debug("token rejected with 401; logging in again")
                self._set(await self._login(), "relogin")
                return True
            try:
                self._set(await self._renew(rejected), "renewal")
            except AuthenticationError as exc:
                raise _token_only_error(exc) from None
            return True

    def _start(self) -> None:
        """Choose between the configured and the stored token (called once, under the lock)."""
        self._started = True
        candidate = self._configured
        stored = self._load_stored()
        if stored and stored != candidate and self._prefer_stored(stored, candidate):
            candidate = stored
            self._on_event("stored_token")
            logger.debug("using the stored token, which is newer than the configured one")
        if candidate:
            self._set(candidate, None)

    def _load_stored(self) -> str | None:
        if self._store is None:
            return None
        try:
            return self._store.load()
        except OSError as exc:
            logger.warning("could not read the token store: %s", type(exc).__name__)
            return None

    def _prefer_stored(self, stored: str, configured: str | None) -> bool:
        info = token_info(stored)
        if info.expires_at is not None and info.expires_at <= self.clock():
            return False
        if configured is None:
            return True
        configured_iat = token_info(configured).issued_at
        return (
            info.issued_at is not None
            and configured_iat is not None
            and info.issued_at > configured_iat
        )

    async def _obtain_initial(self) -> None:
        if self._login is None:
            raise AuthenticationError(
                "no access token and no password configured",
                method="GET",
                path=RENEW_TOKEN_PATH,
            )
        self._set(await self._login(), "login")

    async def _renew_or_relogin(self, *, scheduled: bool = False) -> None:
        assert self._token is not None
        now = self.clock()
        expired = now >= self._expires_at
        if expired and self._login is not None:
            self._set(await self._login(), "relogin")
            return
        try:
            self._set(await self._renew(self._token), "renewal")
        except AuthenticationError as exc:
            if self._login is None:
                raise _token_only_error(exc) from None
            logger.debug("renewal rejected with 401; logging in again")
            self._set(await self._login(), "relogin")
        except ServiceError as exc:
            if not scheduled or expired:
                raise
            # The current token still works: keep it and try renewing again later.
            self._renew_at = min(self._expires_at, now + RENEW_RETRY_SECONDS)
            logger.warning("token renewal failed (%s); retrying in %.0fs",
                           type(exc).__name__, self._renew_at - now)

    def _set(self, token: str, event: str | None) -> None:
        now = self.clock()
        info = token_info(token)
        expires_at = info.expires_at if info.expires_at is not None else now + DEFAULT_TOKEN_LIFETIME_SECONDS
        issued_at = info.issued_at if info.issued_at is not None and info.issued_at < expires_at else now
        lifetime = max(0.0, expires_at - min(issued_at, now))
        margin = min(self._renew_margin, RENEW_MARGIN_FRACTION * lifetime)
        if self._token is not None and self._current_accepted:
            self._accepted_before.add(self._token)
        self._token, self._current_accepted = token, False
        self._known.add(token)
        self._expires_at = expires_at
        self._renew_at = expires_at - margin
        if event is None:
            return
        self._on_event(event)
        if self._store is not None:
            try:
                self._store.save(token)
            except OSError as exc:
                logger.warning(
                    "could not save the renewed token to the token store (%s); "
                    "the next run may need a fresh access_token",
                    type(exc).__name__,
                )


def _token_only_error(cause: AuthenticationError) -> AuthenticationError:
    return AuthenticationError(
        TOKEN_ONLY_REJECTED,
        method=cause.method,
        path=cause.path,
        namespace=cause.namespace,
        status_code=cause.status_code,
    )
