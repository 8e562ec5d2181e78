"""Retry policy of one logical request: the first attempt bare, the rest with tenacity.

`RetryPolicy.run(once, ...)` calls ``once(attempt_number)``:

1. attempt 1 runs directly; nothing retry-related is built. Its value is returned,
   any error other than `Retryable` propagates as it is;
2. a `Retryable` that is `final` (a name that does not resolve, an untrusted
   certificate, a body over the size cap), or one when `max_attempts` is 1, raises
   `RequestFailedError` at once;
3. otherwise a `tenacity.AsyncRetrying` takes over. Its first attempt replays the
   failure already seen (so its attempt numbers are the request's, and it does the
   first wait too), then it sends more attempts until ``max_attempts`` of them failed
   otherwise than by a 429, or ``THROTTLED_ATTEMPTS_FACTOR x max_attempts`` in all. It
   retries only a `Retryable` that is not `final`, and waits full-jitter
   exponential backoff (`wait_random_exponential`: uniform in 0 ..
   ``min(backoff_max, backoff_initial * 2 ** (n - 1))`` after attempt n), never
   shorter than the failure's ``Retry-After``. Every wait counts one retry
   (`on_retry`);
4. when the attempts are used up, or a `final` failure comes, the last `Retryable`
   becomes `RequestFailedError` with `attempts`, `last_error` and `status_code`,
   its message redacted, chained to the failure's cause.

`Retryable` is the client's internal outcome type; it never escapes the client.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import NoReturn, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, wait_random_exponential
from tenacity.wait import wait_base

from .errors import RequestFailedError

__all__ = ["RetryPolicy", "Retryable"]

#: A 429 asks to come back later; it is no failure of the request. So 429s do not use
#: up `max_attempts`: a request gives up after `max_attempts` other failures, or after
#: this many times `max_attempts` attempts in all (and `stall_timeout` bounds the time).
THROTTLED_ATTEMPTS_FACTOR = 4

logger = logging.getLogger("diligence.client")
T = TypeVar("T")


class Retryable(Exception):
    """One failed attempt, retried unless `final`; never escapes the client."""

    def __init__(self, last_error: str, message: str, *, status_code: int | None = None,
                 retry_after: float | None = None, cause: BaseException | None = None,
                 final: bool = False) -> None:
        super().__init__(last_error)
        self.last_error, self.message, self.status_code = last_error, message, status_code
        self.retry_after, self.cause, self.final = retry_after, cause, final


class _AtLeastRetryAfter(wait_base):
    """Full-jitter exponential backoff, never shorter than the failure's Retry-After."""

    def __init__(self, initial: float, maximum: float) -> None:
        self.jitter = wait_random_exponential(multiplier=initial, max=maximum)

    def __call__(self, retry_state: RetryCallState) -> float:
        wait = self.jitter(retry_state)
        failure = retry_state.outcome.exception() if retry_state.outcome else None
        retry_after = failure.retry_after if isinstance(failure, Retryable) else None
        return max(retry_after or 0.0, wait)


def _is_retried(exc: BaseException) -> bool:
    return isinstance(exc, Retryable) and not exc.final


class RetryPolicy:
    """How one client retries: bounded attempts, backoff, and its final error."""

    def __init__(self, *, max_attempts: int, backoff_initial: float, backoff_max: float,
                 on_retry: Callable[[], None],
                 secrets: Callable[[], list[str | None]]) -> None:
        self.max_attempts = max_attempts
        self.wait = _AtLeastRetryAfter(backoff_initial, backoff_max)
        self.on_retry = on_retry
        self.secrets = secrets
        #: requests now waiting before their next attempt, and why the last one waits
        self.waiting = 0
        self.last_reason: str | None = None

    async def run(self, method: str, path: str, namespace: str | None,
                  once: Callable[[int], Awaitable[T]]) -> T:
        """Run `once(attempt_number)` until it succeeds, is not retryable, or the
        attempts are used up (then `RequestFailedError`)."""
        try:
            return await once(1)
        except Retryable as exc:
            if exc.final or self.max_attempts == 1:
                self._fail(exc, 1, method, path, namespace)
            first = exc
        return await self._retry(first, method, path, namespace, once)

    async def _retry(self, first: Retryable, method: str, path: str, namespace: str | None,
                     once: Callable[[int], Awaitable[T]]) -> T:
        failed = 0  # attempts that failed otherwise than by a 429

        def stop(state: RetryCallState) -> bool:
            nonlocal failed
            failure = state.outcome.exception() if state.outcome else None
            failed += not (isinstance(failure, Retryable) and failure.status_code == 429)
            return (failed >= self.max_attempts
                    or state.attempt_number >= self.max_attempts * THROTTLED_ATTEMPTS_FACTOR)

        retrying = AsyncRetrying(
            stop=stop,
            wait=self.wait,
            retry=retry_if_exception(_is_retried),
            before_sleep=self._before_sleep,
            sleep=self._sleep,
            reraise=True,
        )
        number = 1
        try:
            async for attempt in retrying:
                with attempt:
                    number = attempt.retry_state.attempt_number
                    if number == 1:
                        raise first  # the bare attempt's failure, replayed
                    return await once(number)
        except Retryable as exc:
            self._fail(exc, number, method, path, namespace)
        raise AssertionError("unreachable: tenacity returns or raises")  # pragma: no cover

    async def _sleep(self, seconds: float) -> None:
        self.waiting += 1
        try:
            await asyncio.sleep(seconds)
        finally:
            self.waiting -= 1

    def _before_sleep(self, retry_state: RetryCallState) -> None:
        self.on_retry()
        failure = retry_state.outcome.exception() if retry_state.outcome else None
        self.last_reason = getattr(failure, "last_error", None) or type(failure).__name__
        wait = retry_state.next_action.sleep if retry_state.next_action else 0.0
        logger.debug("retry %d/%d after %s in %.3fs", retry_state.attempt_number + 1,
                     self.max_attempts, getattr(failure, "last_error", failure), wait)

    def _fail(self, exc: Retryable, attempts: int, method: str, path: str,
              namespace: str | None) -> NoReturn:
        raise RequestFailedError(
            exc.message, method=method, path=path, namespace=namespace,
            status_code=exc.status_code, attempts=attempts, last_error=exc.last_error,
            secrets=self.secrets()) from exc.cause
