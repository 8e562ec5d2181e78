"""Which task failures deserve another attempt.

The service client already retries each request (5xx, 429, timeouts, resets), so a
task-level retry is for what outlasts those: a service that is down for a while, a
warehouse briefly locked by another writer. Bad credentials, bad configuration and
unknown namespaces fail the same way every time and are never retried. The decision
is the errors' own: both roots (``DiligenceError``, the client's ``SourceError``) carry
`transient`; of the libraries' errors, connection and I/O errors are transient and a
missing dlt setting is permanent (:func:`transient_of`).
"""

from __future__ import annotations

from typing import Any

import duckdb
import httpx
from dlt.common.configuration.exceptions import ConfigFieldMissingException
from prefect.client.schemas.objects import State, TaskRun
from prefect.runtime import flow_run, task_run

from diligence.errors import error_chain

__all__ = ["error_chain", "failure_of", "first_attempt", "is_transient", "retry_if_transient", "transient_of"]


def transient_of(exc: BaseException) -> bool | None:
    """True/False when `exc` says whether a retry may help; None when it says nothing:
    our errors and the client's by their `transient`, connection and I/O errors are
    transient, a missing dlt setting is permanent."""
    transient = getattr(exc, "transient", None)
    if isinstance(transient, bool):
        return transient
    if isinstance(exc, ConfigFieldMissingException):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError, duckdb.IOException, httpx.TransportError)):
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


def first_attempt() -> bool:
    """True on the first attempt of the current task run (inside a task) or flow run.

    A retry goes on from what the failed attempt fetched (its manifest), so a run's
    `restart` parameter applies to its first attempt only.
    """
    count = task_run.run_count if task_run.id else flow_run.run_count
    return int(count or 0) <= 1
