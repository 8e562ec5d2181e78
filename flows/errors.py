"""Exceptions raised by the flow's tasks.

The tree::

    FlowError                       base of everything the flow raises on purpose
    ├── NamespaceSyncError          a namespace could not be read completely (its previous
    │   │                           data is kept); carries the `NamespaceOutcome`; retried
    │   └── UnknownNamespaceError   user-info does not list the namespace (a wrong id, or
    │                               access lost since an earlier sync); never retried
    └── RunFailedError              raised as the run's last step: names every namespace
                                    that was not loaded and every failing data check

Errors of the service client (`pipelines.company_connections.errors`) and of
`diligence.sync.SyncError` pass through unchanged; `flows.retry` decides which of
them are worth another attempt.
"""

from __future__ import annotations

from diligence.sync import NamespaceOutcome


class FlowError(Exception):
    """Base class of the flow's own exceptions."""


class NamespaceSyncError(FlowError):
    """A namespace could not be read completely; nothing of it was loaded."""

    def __init__(self, outcome: NamespaceOutcome) -> None:
        super().__init__(
            f"namespace {outcome.namespace_company_id} not loaded, previous data kept: "
            f"{outcome.error}"
        )
        self.outcome = outcome

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.outcome,))


class UnknownNamespaceError(NamespaceSyncError):
    """User-info does not list the namespace: a wrong id, or access lost since a sync."""


class RunFailedError(FlowError):
    """The run finished its steps, but a namespace was not loaded or a check failed."""
