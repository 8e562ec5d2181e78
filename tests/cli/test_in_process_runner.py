"""The in-process runner of the CLI tests (:func:`helpers.run`) puts back what a command
changes in this process."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tests.helpers import COMMAND_LOGGERS

from .helpers import run


def _closed_stream_handlers() -> list[str]:
    return [
        f"{name or 'root'}: {handler!r}"
        for name in COMMAND_LOGGERS
        for handler in logging.getLogger(name).handlers
        if getattr(getattr(handler, "stream", None), "closed", False)
    ]


def test_a_command_leaves_no_handler_on_its_closed_streams_nor_its_cwd(tmp_path: Path) -> None:
    before = {name: logging.getLogger(name).handlers[:] for name in COMMAND_LOGGERS}
    cwd = os.getcwd()
    result = run(["export", "--warehouse", "missing.duckdb", "--out", "reports"], tmp_path)
    assert result.returncode == 2 and "no warehouse at missing.duckdb" in result.stderr
    assert _closed_stream_handlers() == []
    assert {name: logging.getLogger(name).handlers for name in COMMAND_LOGGERS} == before
    assert os.getcwd() == cwd
