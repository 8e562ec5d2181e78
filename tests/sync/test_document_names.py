"""Stored document file names never come from upstream paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from diligence.documents import _safe


@pytest.mark.parametrize(
    "name",
    ["../../etc/passwd", "/etc/passwd", "..", ".", "a/../../b", "..\\..\\win.ini", "C:\\x", "\x1b[2J.pdf", ""],
)
def test_upstream_names_become_one_plain_component(tmp_path: Path, name: str) -> None:
    cleaned = _safe(name, "file")
    assert cleaned and "/" not in cleaned and "\\" not in cleaned
    assert not cleaned.startswith(".") and cleaned not in (".", "..")
    assert (tmp_path / cleaned).resolve().parent == tmp_path.resolve()
