"""Fault switches of the sandbox and the seeded machinery that applies them.

:class:`Faults` is a plain mutable dataclass: the app reads it on every
request, so changing an attribute (from Python, or via ``POST /_sandbox/faults``)
takes effect at once. All switches are off by default.

Which requests a fault touches:

- ``rate_limit`` applies to every API request (endpoints 1-11 and unknown
  ``/api/`` paths): one token bucket for all of them. ``quota`` (N requests per
  ``quota_window`` seconds, fixed windows) applies to the same requests; beyond it
  429 with the seconds left in the window as ``Retry-After``.
- Shedding (``shed_every``, ``shed_percent``) answers 429 with ``Retry-After:
  shed_retry_after`` to a fixed share of requests to endpoints 3-11, however fast
  or slow they come (a gateway or a shared backend shedding load);
  ``error_every`` answers 503 (``Retry-After: 1``) to every Nth of them. Both
  counters run over the same requests, shedding first.
- Latency (``latency_ms``, ``jitter_ms``, ``slow_rate``/``slow_ms``) and the
  random failures (``error_rate``, ``malformed_rate``, ``reset_rate``) apply to
  endpoints 3-11, and to the two authentication endpoints (1, 2) only when
  ``auth_faults`` is true.
- ``token_lifetime`` changes the lifetime of tokens issued from then on.
- ``revoke_after_uses`` revokes every token once it has been used N times on
  endpoints 3-11 (a token storm: other tools renewing the shared account's token,
  or a gateway rotating sessions); the next use answers 401.
- ``fail_namespaces`` (every request made in those namespaces answers 500)
  and ``deny_pairs`` (403 for those company x type pairs on endpoints 7, 9,
  10 and 11) are deterministic failures; the ground truth ignores them.
- Admin routes (``/_sandbox/...``) and signed file downloads (``/_files/...``)
  are never faulted.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any


def _switch(default: Any, help_text: str) -> Any:
    return field(default=default, metadata={"help": help_text})


@dataclass(slots=True)
class Faults:
    """Fault switches; every field's ``help`` metadata doubles as CLI help.

    Slotted, so assigning a misspelt switch raises ``AttributeError`` instead
    of silently doing nothing. The two list switches are deterministic
    failures for tests and are not exposed as command-line flags.
    """

    latency_ms: float = _switch(0.0, "fixed latency added to every API response (ms)")
    jitter_ms: float = _switch(0.0, "random extra latency, uniform in 0..N ms")
    error_rate: float = _switch(
        0.0, "share of requests answered 500/502/503 (503 with Retry-After: 1)")
    rate_limit: float = _switch(
        0.0, "API requests per second (token bucket); beyond it 429 with Retry-After; 0 = off")
    rate_burst: int = _switch(0, "token bucket size; 0 = max(1, rate_limit)")
    quota: int = _switch(0, "API requests allowed per quota window; beyond it 429; 0 = off")
    quota_window: float = _switch(60.0, "length of a quota window (s)")
    shed_every: int = _switch(
        0, "answer 429 to every Nth request to endpoints 3-11, whatever the rate; 0 = off")
    shed_percent: float = _switch(
        0.0, "answer 429 to this percentage of requests to endpoints 3-11 (random, seeded)")
    shed_retry_after: int = _switch(1, "Retry-After of a shed request (s)")
    error_every: int = _switch(0, "answer 503 to every Nth request to endpoints 3-11; 0 = off")
    token_lifetime: int | None = _switch(
        None, "lifetime of newly issued tokens in seconds (default 7 days)")
    revoke_after_uses: int = _switch(
        0, "revoke every token after N uses on endpoints 3-11 (token storms); 0 = off")
    malformed_rate: float = _switch(
        0.0, "share of requests answered 200 with a truncated or non-JSON body")
    reset_rate: float = _switch(0.0, "share of requests whose connection is dropped mid-response")
    slow_rate: float = _switch(0.0, "share of requests delayed by slow_ms (latency spikes)")
    slow_ms: float = _switch(0.0, "delay of a latency spike (ms)")
    auth_faults: bool = _switch(
        False, "also apply latency, error, malformed and reset faults to endpoints 1 and 2")
    fail_namespaces: list[str] = field(default_factory=list, metadata={
        "help": "company ids whose every request (x-namespace) answers 500"})
    deny_pairs: list[list[str]] = field(default_factory=list, metadata={
        "help": "[company_id, company_type_id] pairs whose questionnaire, answers, documents "
                "and document URLs answer 403 although the rights still list the type"})

    def to_dict(self) -> dict[str, Any]:
        """The switches as a JSON-ready dict."""
        return dataclasses.asdict(self)

    def update(self, changes: dict[str, Any]) -> None:
        """Set several switches at once, validating names, types and ranges.

        Raises ``ValueError`` (and changes nothing) on an unknown name or a bad value.
        """
        types = {f.name: f.type for f in dataclasses.fields(self)}
        checked: dict[str, Any] = {}
        for name, value in changes.items():
            if name not in types:
                raise ValueError(f"unknown fault switch {name!r}")
            checked[name] = _coerce(name, value)
        for name, value in checked.items():
            setattr(self, name, value)

    def reset(self) -> None:
        """Turn every switch off again."""
        for f in dataclasses.fields(self):
            default = f.default_factory() if f.default is dataclasses.MISSING else f.default
            setattr(self, f.name, default)

    def denies(self, company_id: str, type_id: str) -> bool:
        """Is (company, type) in ``deny_pairs``?"""
        return any(p[0] == company_id and p[1] == type_id for p in self.deny_pairs)


_RATES = {"error_rate", "malformed_rate", "reset_rate", "slow_rate"}


def _coerce(name: str, value: Any) -> Any:
    if name == "fail_namespaces":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError("fail_namespaces must be a list of company ids")
        return list(value)
    if name == "deny_pairs":
        if not isinstance(value, list) or not all(
                isinstance(p, (list, tuple)) and len(p) == 2
                and all(isinstance(x, str) for x in p) for p in value):
            raise ValueError("deny_pairs must be a list of [company_id, company_type_id]")
        return [list(p) for p in value]
    if name == "auth_faults":
        if not isinstance(value, bool):
            raise ValueError("auth_faults must be true or false")
        return value
    if name == "token_lifetime":
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 1:
            raise ValueError("token_lifetime must be a number of seconds >= 1, or null")
        return int(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{name} must be a non-negative number")
    if name in _RATES and value > 1:
        raise ValueError(f"{name} must be between 0 and 1")
    if name == "shed_percent" and value > 100:
        raise ValueError("shed_percent must be between 0 and 100")
    if name == "quota_window" and value <= 0:
        raise ValueError("quota_window must be positive")
    if name in ("rate_burst", "revoke_after_uses", "quota", "shed_every", "shed_retry_after",
                "error_every"):
        return int(value)
    return float(value)


class Outcome(enum.Enum):
    """What a random failure roll decided for one request."""

    NORMAL = "normal"
    ERROR = "error"
    MALFORMED = "malformed"
    RESET = "reset"


class FaultInjector:
    """Applies :class:`Faults` with a seeded RNG and a token bucket.

    Not thread-safe: call it from the server's event loop only.
    """

    def __init__(self, faults: Faults, seed: int) -> None:
        self.faults = faults
        self.rng = random.Random(seed)
        self._tokens = 0.0
        self._stamp = 0.0
        self._bucket_for: tuple[float, int] | None = None
        self._window_start = float("-inf")
        self._window_used = 0
        self._counted = 0

    def throttle(self) -> int | None:
        """Take one token; None if granted, else the whole seconds to wait (>= 1)."""
        rate = self.faults.rate_limit
        if rate <= 0:
            return None
        burst = float(self.faults.rate_burst or max(1.0, rate))
        now = time.monotonic()
        if self._bucket_for != (rate, self.faults.rate_burst):
            self._bucket_for = (rate, self.faults.rate_burst)
            self._tokens, self._stamp = burst, now
        self._tokens = min(burst, self._tokens + (now - self._stamp) * rate)
        self._stamp = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return None
        return max(1, math.ceil((1.0 - self._tokens) / rate))

    def over_quota(self) -> int | None:
        """Count one request against the fixed-window quota; None if within it, else
        the whole seconds until the window ends (>= 1)."""
        f = self.faults
        if f.quota <= 0:
            return None
        now = time.monotonic()
        if now - self._window_start >= f.quota_window:
            self._window_start, self._window_used = now, 0
        self._window_used += 1
        if self._window_used <= f.quota:
            return None
        return max(1, math.ceil(self._window_start + f.quota_window - now))

    def shed(self) -> int | None:
        """Count one request to endpoints 3-11; the status to answer it with instead
        (429 shed, 503 every Nth), or None."""
        f = self.faults
        if not (f.shed_every or f.shed_percent or f.error_every):
            return None
        self._counted += 1
        if f.shed_every and self._counted % f.shed_every == 0:
            return 429
        if f.shed_percent and self.rng.random() * 100 < f.shed_percent:
            return 429
        if f.error_every and self._counted % f.error_every == 0:
            return 503
        return None

    def delay(self) -> float:
        """Seconds to wait before answering: latency, jitter and possibly a spike."""
        f = self.faults
        ms = f.latency_ms
        if f.jitter_ms > 0:
            ms += self.rng.uniform(0.0, f.jitter_ms)
        if f.slow_rate > 0 and self.rng.random() < f.slow_rate:
            ms += f.slow_ms
        return ms / 1000.0

    def outcome(self) -> Outcome:
        """Roll once for error, malformed body or reset; the rates are
        exclusive shares of requests (their sum above 1 saturates)."""
        f = self.faults
        if f.error_rate <= 0 and f.malformed_rate <= 0 and f.reset_rate <= 0:
            return Outcome.NORMAL
        roll = self.rng.random()
        if roll < f.error_rate:
            return Outcome.ERROR
        roll -= f.error_rate
        if roll < f.malformed_rate:
            return Outcome.MALFORMED
        roll -= f.malformed_rate
        if roll < f.reset_rate:
            return Outcome.RESET
        return Outcome.NORMAL

    def error_status(self) -> int:
        """One of 500, 502, 503 for an injected server error."""
        return self.rng.choice((500, 502, 503))

    def malformed(self, body: bytes) -> tuple[bytes, bytes]:
        """(content type, body) of a broken 200 response: the real JSON body cut
        in half, or an HTML error page."""
        if len(body) > 2 and self.rng.random() < 0.5:
            return b"application/json", body[: len(body) // 2]
        return b"text/html; charset=utf-8", b"<html><body><h1>Gateway timeout</h1></body></html>"
