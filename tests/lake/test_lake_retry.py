"""Transient DuckLake commit conflicts are retried by loading the namespace again from the
start (its transaction was rolled back); anything else is raised at once."""

from __future__ import annotations

import pytest

from diligence.warehouse import lake

CONFLICT = (
    "Failed to commit DuckLake transaction. Transaction conflict - attempting to create "
    'table "_dlt_loads" in schema "raw" - but this table has been created by another '
    "transaction already"
)


class Attempts:
    """A namespace's whole load that fails with each of `errors` in turn, then succeeds."""

    def __init__(self, errors: list[Exception]) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "load-info"


def _wrapped(message: str) -> Exception:
    """An error whose cause carries `message`, as dlt's PipelineStepFailed does."""
    try:
        try:
            raise RuntimeError(message)
        except RuntimeError as inner:
            raise ValueError("Pipeline execution failed at step=load") from inner
    except ValueError as outer:
        return outer


def test_conflicts_are_recognised_through_the_cause_chain() -> None:
    assert lake.is_commit_conflict(_wrapped(CONFLICT))
    assert not lake.is_commit_conflict(_wrapped("permission denied for table companies"))


def test_a_conflict_loads_the_whole_namespace_again() -> None:
    load = Attempts([_wrapped(CONFLICT), _wrapped(CONFLICT)])
    assert lake.load_retrying(load, backoff_seconds=0.001) == "load-info"
    assert load.calls == 3


def test_other_errors_are_not_retried() -> None:
    load = Attempts([_wrapped("permission denied")])
    with pytest.raises(ValueError):
        lake.load_retrying(load, backoff_seconds=0.001)
    assert load.calls == 1


def test_retries_are_bounded() -> None:
    load = Attempts([_wrapped(CONFLICT)] * 10)
    with pytest.raises(ValueError):
        lake.load_retrying(load, attempts=3, backoff_seconds=0.001)
    assert load.calls == 3
