"""Tables and goals of the benchmark, rendered as Markdown (stdout and RESULTS.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


def num(value: Any, digits: int = 2) -> str:
    """A number for a table cell: thousands separators, fixed digits, '—' for missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def pct(value: float | None, digits: int = 0) -> str:
    """A share as a percentage."""
    if value is None or math.isnan(value):
        return "—"
    return f"{value * 100:.{digits}f} %"


@dataclass
class Table:
    """One Markdown table."""

    headers: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    title: str = ""

    def render(self) -> str:
        cells = [[c if isinstance(c, str) else num(c) for c in row] for row in self.rows]
        out = [f"*{self.title}*", ""] if self.title else []
        out.append("| " + " | ".join(self.headers) + " |")
        out.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(self.headers))) + "|")
        out += ["| " + " | ".join(row) + " |" for row in cells]
        return "\n".join(out)


@dataclass
class Goal:
    """A target, the measured value, and whether it is met."""

    name: str
    target: str
    measured: str
    met: bool | None  # None: could not be measured

    @property
    def verdict(self) -> str:
        return {True: "met", False: "**missed**", None: "not measured"}[self.met]


@dataclass
class Section:
    """One scenario's output."""

    key: str
    title: str
    setup: str
    tables: list[Table] = field(default_factory=list)
    goals: list[Goal] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    profiles: list[str] = field(default_factory=list)
    raw: dict[str, Any] = field(default_factory=dict)

    def render(self, level: int = 2) -> str:
        """The section as Markdown, its title a heading of `level`."""
        parts = [f"{'#' * level} {self.title}", "", self.setup, ""]
        for table in self.tables:
            parts += [table.render(), ""]
        if self.goals:
            goals = Table(["goal", "target", "measured (median)", "verdict"],
                          [[g.name, g.target, g.measured, g.verdict] for g in self.goals])
            parts += [goals.render(), ""]
        for note in self.notes:
            parts += [note, ""]
        if self.profiles:
            parts += [f"{'#' * (level + 1)} What bounds it (profile)", ""]
            for profile in self.profiles:
                parts += [profile, ""]
        return "\n".join(parts).rstrip() + "\n"


def summary_table(sections: list[Section]) -> Table:
    """Every goal of every scenario in one table."""
    rows = [[s.title.split(". ", 1)[-1], g.name, g.target, g.measured, g.verdict]
            for s in sections for g in s.goals]
    return Table(["scenario", "goal", "target", "measured (median)", "verdict"], rows)
