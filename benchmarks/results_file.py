"""``benchmarks/RESULTS.md`` is written by several scripts, each owning one part of it.

A script's part sits between its own two HTML comments (invisible in the rendered
Markdown); writing it again replaces only that part, so the sections the other
scripts wrote, and the hand-written ones, stay as they are.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["publish", "read_part", "write_part"]


def write_part(out: Path, name: str, text: str, *, new_at_top: bool = False) -> None:
    """Write `text` as the part `name` of `out`, between ``<!-- name:start -->`` and
    ``<!-- name:end -->``. A file without that part gets it at the end (at the top with
    `new_at_top`); a missing or empty file is created holding only the part."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{text.strip(chr(10))}\n{end}"
    current = out.read_text(encoding="utf-8") if out.exists() else ""
    if start in current and end in current.split(start, 1)[1]:
        before, rest = current.split(start, 1)
        updated = before + block + rest.split(end, 1)[1]
    elif not current.strip():
        updated = block + "\n"
    elif new_at_top:
        updated = block + "\n\n" + current.lstrip("\n")
    else:
        updated = current.rstrip("\n") + "\n\n" + block + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(updated, encoding="utf-8")


def read_part(out: Path, name: str) -> str | None:
    """The text of the part `name` of `out` (see :func:`write_part`), or None."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    current = out.read_text(encoding="utf-8") if out.exists() else ""
    if start not in current or end not in current.split(start, 1)[1]:
        return None
    return current.split(start, 1)[1].split(end, 1)[0].strip("\n")


def publish(results: Any, raw: Path, out: Path, name: str, text: str) -> None:
    """A benchmark's end: its raw figures as JSON in `raw`, `text` as the part `name` of
    `out` (see :func:`write_part`) and on stdout."""
    raw.parent.mkdir(parents=True, exist_ok=True)
    raw.write_text(json.dumps(results, indent=2))
    write_part(out, name, text)
    print(text)
