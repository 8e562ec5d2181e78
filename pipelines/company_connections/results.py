"""What reading a namespace ends in, and who hears of its progress.

:func:`~.extract.extract_namespaces` hands each namespace over as a
:data:`NamespaceResult`: a :class:`NamespaceSnapshot` (its staged tables, with the
:class:`SyncIssue` of every authoritative 403/404) or a :class:`NamespaceFailure`
(nothing of it is loaded). The stream (:mod:`.stream`) yields these results, the dlt
source (:mod:`.source`) loads them, and a :class:`ProgressListener` hears of the
requests and rows while they are read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

from .staging import StagedTable

__all__ = [
    "NamespaceFailure",
    "NamespaceResult",
    "NamespaceSnapshot",
    "ProgressListener",
    "SyncIssue",
]


class ProgressListener(Protocol):
    """Receives progress of an extraction; called from the event loop thread."""

    def planned(self, namespace: str, requests: int) -> None:
        """`requests` more requests are now known to be needed for `namespace`."""

    def done(self, namespace: str, requests: int, rows: int) -> None:
        """`requests` requests of `namespace` finished, adding `rows` rows."""

    def waiting(self, namespace: str, state: str) -> None:
        """No request of `namespace` finished for a while; `state` says what the client
        waits for (e.g. "rate-limited, retrying in 1 s", "renewing token")."""


@dataclass(frozen=True)
class SyncIssue:
    """A request that the service authoritatively denied (403) or answered 404."""

    endpoint: str
    company_id: str | None
    company_type_id: str | None
    http_status: int | None
    message: str


@dataclass
class NamespaceSnapshot:
    """One namespace read completely: its staged tables, ready to be loaded atomically."""

    namespace_company_id: str
    synced_at: datetime
    started_at: datetime
    finished_at: datetime | None = None
    requests: int = 0
    #: table name -> staged Parquet file, row count and size (see :mod:`.staging`)
    tables: dict[str, StagedTable] = field(default_factory=dict)
    issues: list[SyncIssue] = field(default_factory=list)
    folder: Path | None = None
    #: requests answered from an interrupted sync's evidence (not sent again)
    kept: int = 0
    #: when that interrupted sync began
    kept_since: datetime | None = None

    @property
    def row_count(self) -> int:
        """Rows read over every table of the namespace."""
        return sum(table.rows for table in self.tables.values())


@dataclass(frozen=True)
class NamespaceFailure:
    """A namespace that could not be read completely; nothing of it is loaded.

    `issue` is the request that failed for good, when one did (not for a namespace
    the user does not belong to).
    """

    namespace_company_id: str
    error: str
    started_at: datetime
    finished_at: datetime
    requests: int = 0
    issue: SyncIssue | None = None
    #: requests answered from an interrupted sync's evidence
    kept: int = 0


#: What reading a namespace ends in.
NamespaceResult = NamespaceSnapshot | NamespaceFailure
