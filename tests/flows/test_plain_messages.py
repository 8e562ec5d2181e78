"""What the Prefect UI shows of a failed namespace: plain lines, no traceback, no class names."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import LOST_NAMESPACE, SharedRun

pytestmark = pytest.mark.usefixtures("prefect_harness")


def test_failed_namespace_is_a_plain_message_without_traceback(
    lost_namespace_run: SharedRun, runs: Any
) -> None:
    bad, state = LOST_NAMESPACE, lost_namespace_run.state

    assert state.is_failed()
    assert state.message.startswith(f"1 of 3 namespaces not loaded (previous data kept): {bad} (")
    assert "RunFailedError" not in state.message and "Error:" not in state.message
    logs = runs.log_text(state.state_details.flow_run_id)
    assert f"namespace {bad} not loaded" in logs
    assert "Traceback" not in logs
    assert "RunFailedError" not in logs
    assert "|[" not in logs  # dlt's own line format: 2026-..|[WARNING]|pid|...
    for line in logs.splitlines():
        if bad in line:
            assert "\n" not in line and len(line) < 1000
