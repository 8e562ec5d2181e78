"""The CLI's two consoles (stdout, stderr), made for people and for cron alike.

On a terminal, rich wraps and truncates to the window as usual. Off a terminal (cron,
CI, a pipe, Prefect's log capture) rich would assume 80 columns, wrap error lines and
cut IDs in tables with an ellipsis; a log line must stay one line and an ID whole, so
there the width is unbounded in practice and nothing is wrapped or shortened.
"""

from __future__ import annotations

import sys

from rich.console import Console

__all__ = ["OFF_TERMINAL_WIDTH", "make_console", "is_terminal"]

#: Columns assumed off a terminal: wide enough that no line or table is ever cut.
OFF_TERMINAL_WIDTH = 10_000


def is_terminal(stderr: bool = False) -> bool:
    """True when the stream is an interactive terminal."""
    stream = sys.stderr if stderr else sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def make_console(*, stderr: bool = False) -> Console:
    """A console for stdout (or stderr) that never wraps nor truncates off a terminal."""
    if is_terminal(stderr):
        return Console(stderr=stderr)
    return Console(stderr=stderr, width=OFF_TERMINAL_WIDTH, soft_wrap=True)
