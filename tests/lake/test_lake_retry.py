"""Transient DuckLake commit conflicts are retried by reloading the pending package;
anything else is raised at once."""

from __future__ import annotations

import pytest

from diligence.warehouse import lake

CONFLICT = (
    "Failed to commit DuckLake transaction. Transaction conflict - attempting to create "
    'table "_dlt_loads" in schema "raw" - but this table has been created by another '
    "transaction already"
)


class FakePipeline:
    def __init__(self, run_error: Exception | None, load_errors: list[Exception]) -> None:
        self.run_error = run_error
        self.load_errors = list(load_errors)
        self.calls: list[str] = []

    def run(self, data: object) -> str:
        self.calls.append("run")
        if self.run_error:
            raise self.run_error
        return "run-info"

    def load(self) -> str:
        self.calls.append("load")
        if self.load_errors:
            raise self.load_errors.pop(0)
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


def test_a_conflict_reloads_the_pending_package() -> None:
    pipeline = FakePipeline(_wrapped(CONFLICT), [_wrapped(CONFLICT)])
    result = lake.load_retrying(pipeline, [1], backoff_seconds=0.001)  # type: ignore[arg-type]
    assert result == "load-info"
    assert pipeline.calls == ["run", "load", "load"]


def test_other_errors_are_not_retried() -> None:
    pipeline = FakePipeline(_wrapped("permission denied"), [])
    with pytest.raises(ValueError):
        lake.load_retrying(pipeline, [1], backoff_seconds=0.001)  # type: ignore[arg-type]
    assert pipeline.calls == ["run"]


def test_retries_are_bounded() -> None:
    pipeline = FakePipeline(_wrapped(CONFLICT), [_wrapped(CONFLICT)] * 10)
    with pytest.raises(ValueError):
        lake.load_retrying(pipeline, [1], attempts=3, backoff_seconds=0.001)  # type: ignore[arg-type]
    assert pipeline.calls == ["run", "load", "load"]
