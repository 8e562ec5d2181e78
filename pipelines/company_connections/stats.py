"""Counters of one client's traffic: what `ServiceClient.stats` holds.

They count attempts, not logical calls: every request sent, every answer by status
(logged at debug level as it is counted), every wait before another attempt, every
login, re-login and renewal, and the same per namespace. The sync reports them
(``RequestStats.as_dict()``) once its stream is closed.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RequestStats"]

logger = logging.getLogger("diligence.client")


@dataclass
class RequestStats:
    """Counters of one client's traffic (attempts, not logical calls)."""

    requests_sent: int = 0
    responses_by_status: Counter[int] = field(default_factory=Counter)
    retries: int = 0
    throttled: int = 0  # 429 responses
    transport_errors: int = 0
    logins: int = 0
    relogins: int = 0
    renewals: int = 0
    bytes_received: int = 0
    #: namespace -> {"requests", "retries", "throttled"} (attempts sent for it, waits
    #: before another attempt, 429 answers); login and user-info have no namespace
    by_namespace: dict[str, Counter[str]] = field(default_factory=dict)

    def count(self, namespace: str | None, key: str) -> None:
        """Count one `key` event of `namespace` (nothing for requests of no namespace)."""
        if namespace is not None:
            self.by_namespace.setdefault(namespace, Counter())[key] += 1

    def count_response(self, method: str, path: str, attempt: int, status: int, size: int) -> None:
        """Count one answer of `status` and `size` bytes, and log it at debug level."""
        self.responses_by_status[status] += 1
        self.bytes_received += size
        if status == 429:
            self.throttled += 1
        logger.debug("%s %s -> %d (attempt %d)", method, path, status, attempt)

    def count_retry(self) -> None:
        """Count one wait before another attempt (the retry policy's `on_retry`)."""
        self.retries += 1

    def count_auth_event(self, event: str) -> None:
        """Count a "login", "relogin" or "renewal" (the token manager's `on_event`)."""
        if event == "login":
            self.logins += 1
        elif event == "relogin":
            self.relogins += 1
        elif event == "renewal":
            self.renewals += 1

    def as_dict(self) -> dict[str, Any]:
        """The counters as plain JSON-able values."""
        data = dict(self.__dict__)
        data["responses_by_status"] = {str(k): v for k, v in sorted(self.responses_by_status.items())}
        data["by_namespace"] = {
            ns: {key: counts[key] for key in ("requests", "retries", "throttled")}
            for ns, counts in sorted(self.by_namespace.items())
        }
        return data
