"""Which task failures deserve another attempt.

The service client already retries each request (5xx, 429, timeouts, resets), so a
task-level retry is for what outlasts those: a namespace still failing after them, a
service that is down for a while, a warehouse briefly locked by another writer. Bad
credentials, bad configuration and unknown namespaces fail the same way every time and
are never retried.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb
import httpx
from dlt.common.configuration.exceptions import ConfigFieldMissingException
from prefect.client.schemas.objects import State, TaskRun

from diligence.sync import SyncError
from diligence.warehouse import WarehouseBusyError
from pipelines.company_connections.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    DeniedError,
    NotFoundError,
    RequestFailedError,
)

from .errors import NamespaceSyncError, UnknownNamespaceError

#: Anywhere in an error's chain, these make it permanent.
PERMANENT_ERRORS: tuple[type[BaseException], ...] = (
    AuthenticationError,
    ConfigurationError,
    ConfigFieldMissingException,
    BadRequestError,
    DeniedError,
    NotFoundError,
    UnknownNamespaceError,
)

#: Anywhere in an error's chain (and no permanent error there), these make it transient.
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    RequestFailedError,
    NamespaceSyncError,
    WarehouseBusyError,
    SyncError,  # service unreachable, load interrupted; causes above are checked first
    duckdb.IOException,  # e.g. another process holds the DuckDB file
    httpx.TransportError,
    ConnectionError,
    TimeoutError,
)


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


def is_transient(exc: BaseException | None) -> bool:
    """True when another attempt of the failed step may succeed."""
    if exc is None:
        return False
    chain = list(error_chain(exc))
    if any(isinstance(e, PERMANENT_ERRORS) for e in chain):
        return False
    return any(isinstance(e, TRANSIENT_ERRORS) for e in chain)


def failure_of(state: State[Any]) -> BaseException | None:
    """The exception a failed task state holds, if it holds one."""
    data = state.data
    if isinstance(data, BaseException):
        return data
    result = getattr(data, "result", None)  # a ResultRecord
    return result if isinstance(result, BaseException) else None


def retry_if_transient(task: Any, task_run: TaskRun, state: State[Any]) -> bool:
    """`retry_condition_fn` for I/O tasks: retry transient failures only."""
    return is_transient(failure_of(state))
