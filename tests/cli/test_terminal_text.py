"""`diligence status` shows upstream text with its escapes visible, never obeyed."""

from __future__ import annotations

import io

from rich.console import Console

from diligence.status import render_status

HOSTILE = "\x1b]8;;http://evil.test\x1b\\click\x1b]8;;\x1b\\ [link=http://evil.test]x[/link]\x1b[2J"


def test_status_escapes_upstream_errors_and_names() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=400, force_terminal=False, color_system=None)
    status = {
        "state": "missing",
        "sync_running": None,
        "failed_attempts": [{"at": "2026-01-01", "pid": 1, "error": HOSTILE}],
    }
    render_status("w.duckdb", console, status)
    shown = buffer.getvalue()
    assert "\x1b" not in shown
    assert "\\x1b]8;;http://evil.test" in shown
    assert "[link=http://evil.test]x[/link]" in shown
