"""The errors of `diligence/`: one root, and whether another attempt may succeed.

The tree::

    DiligenceError                  base of everything diligence/ raises on purpose;
    │                               `transient`: may the same step succeed if retried?
    ├── SyncError                   a sync could not run at all (credentials, service,
    │                               configuration, a failed load); transient unless its
    │                               cause is permanent (see :func:`is_transient`)
    ├── SettingsError               a setting is missing or invalid; never transient
    ├── WarehouseBusyError          another writer holds the warehouse (the writer lock or
    │                               an open DuckDB session); transient
    ├── WarehouseLocationError      a warehouse location (DuckDB file or DuckLake URI) or
    │                               its data path cannot be used (diligence.location); never
    │                               transient
    └── NamespaceSyncError          a namespace could not be read completely (its previous
        │                           data is kept); carries its `NamespaceOutcome`; transient
        └── UnknownNamespaceError   user-info does not list the namespace (a wrong id, or
                                    access lost since an earlier sync); never transient

The client's errors have their own root in ``pipelines/`` (``ServiceError``: requests
that failed, and ``ConfigurationError``); they are mapped to transient/permanent in
:func:`transient_of`. The CLI catches the roots; the flow's ``retry_if_transient``
calls :func:`is_transient`. Nothing here imports dlt, DuckDB or Prefect at import time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = [
    "DiligenceError",
    "SyncError",
    "SettingsError",
    "WarehouseBusyError",
    "NamespaceSyncError",
    "UnknownNamespaceError",
    "error_chain",
    "transient_of",
    "is_transient",
]


class DiligenceError(Exception):
    """Base of every error diligence/ raises on purpose.

    `transient` says whether another attempt of the same step may succeed; subclasses
    set a default, and an instance may override it.
    """

    transient: bool = False

    def __init__(self, message: str = "", *, transient: bool | None = None) -> None:
        super().__init__(message)
        if transient is not None:
            self.transient = transient


class SyncError(DiligenceError):
    """A sync that could not run at all (credentials, service, configuration, load)."""

    transient = True


class SettingsError(DiligenceError):
    """A setting is missing or invalid."""

    transient = False


class WarehouseBusyError(DiligenceError):
    """Another writer holds the warehouse; it is free again once that writer is done."""

    transient = True


class NamespaceSyncError(DiligenceError):
    """A namespace could not be read completely; nothing of it was loaded."""

    transient = True

    def __init__(self, outcome: Any) -> None:
        super().__init__(
            f"namespace {outcome.namespace_company_id} not loaded, previous data kept: "
            f"{outcome.error}"
        )
        self.outcome = outcome

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.outcome,))


class UnknownNamespaceError(NamespaceSyncError):
    """User-info does not list the namespace: a wrong id, or access lost since a sync."""

    transient = False


def error_chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then its causes and contexts and the members of exception groups."""
    seen: set[int] = set()
    pending = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                pending.append(linked)


def transient_of(exc: BaseException) -> bool | None:
    """True/False when `exc` says whether a retry may help; None when it says nothing.

    Our own errors carry `transient`. The client's: a request that still failed after
    its retries (`RequestFailedError`) is transient, every other `ServiceError` (401,
    403, 404, 400) and a `ConfigurationError` are permanent. Connection and I/O errors
    are transient; a missing dlt setting is permanent.
    """
    if isinstance(exc, DiligenceError):
        return exc.transient
    from pipelines.company_connections import errors as client_errors

    if isinstance(exc, client_errors.RequestFailedError):
        return True
    if isinstance(exc, (client_errors.ServiceError, client_errors.ConfigurationError)):
        return False
    name = type(exc).__name__
    if name == "ConfigFieldMissingException":
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)) or name in ("IOException", "TransportError"):
        return True
    module = type(exc).__module__ or ""
    if module.startswith("httpx") and any(c.__name__ == "TransportError" for c in type(exc).__mro__):
        return True
    return None


def is_transient(exc: BaseException | None) -> bool:
    """True when another attempt of the failed step may succeed.

    A permanent error anywhere in the chain makes the whole failure permanent;
    otherwise it is transient when some error in the chain says so.
    """
    if exc is None:
        return False
    verdicts = [transient_of(e) for e in error_chain(exc)]
    if any(v is False for v in verdicts):
        return False
    return any(v is True for v in verdicts)
