"""Progress lines of a sync, as cron and Prefect see them (no terminal)."""

from __future__ import annotations

import io
import logging

import pytest
from rich.console import Console

from diligence.cli.progress import SyncProgress


def test_a_wait_is_shown_until_a_request_completes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="diligence.sync")
    progress = SyncProgress(console=Console(file=io.StringIO()), interval=0.0)
    with progress:
        progress.planned("ns-1", 10)
        progress.waiting("ns-1", "rate-limited, retrying in 1 s")
        progress.done("ns-1", 1, 2)
    lines = [r.getMessage() for r in caplog.records]
    assert "namespace ns-1: 0/10 requests, 0 rows; waiting: rate-limited, retrying in 1 s" in lines
    assert lines[-1] == "namespace ns-1: 1/10 requests, 2 rows"
