"""The documentation's links lead somewhere: every relative link of a committed Markdown
file names a file of the repository, and every `#anchor` a heading of its target (as
GitHub renders it). The README and the benchmark results stay short enough to read."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def markdown_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return [ROOT / name for name in listed if (ROOT / name).exists()]


def prose_lines(path: Path) -> list[str]:
    """The lines of `path` outside fenced code blocks."""
    lines, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(path):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def test_the_slugs_are_githubs() -> None:
    assert slug("DuckDB 1.5.5 vs 2.0") == "duckdb-155-vs-20"
    assert slug("A hostile service (`python -m benchmarks.hostile`)") == (
        "a-hostile-service-python--m-benchmarkshostile"
    )
    assert slug("Run it: the `diligence` CLI") == "run-it-the-diligence-cli"


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(path: Path) -> None:
    broken = []
    for line in prose_lines(path):
        for target in LINK.findall(line):
            if re.match(r"[a-z]+:", target):
                continue  # http(s), mailto: not checked here
            name, _, anchor = target.partition("#")
            file = (path.parent / name).resolve() if name else path
            if not file.exists():
                broken.append(f"{target}: no such file")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                broken.append(f"{target}: no such heading")
    assert not broken, broken


@pytest.mark.parametrize("name", ["README.md", "benchmarks/RESULTS.md"])
def test_the_readme_and_the_results_stay_short(name: str) -> None:
    assert (ROOT / name).stat().st_size <= 20_000, f"{name} is longer than 20 KB: move details to docs/"
