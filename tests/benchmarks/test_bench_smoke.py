"""Smoke test of the benchmark: every scenario runs end to end on tiny profiles and
reports a table with numbers. No timing is asserted (the machine is shared).

Marked `bench`: it runs the whole benchmark (minutes of CPU on a busy machine), so it is
out of the default run; `make bench-smoke` (``pytest -m bench``) runs it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.bench]

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = {
    "latency": "1. Latency-bound",
    "throughput": "2. Throughput-bound",
    "rate": "3. Rate-limited",
    "baselines": "4. Baselines side by side",
    "scaling": "5. Scaling",
}
_NUMBER = re.compile(r"\d")


def _sections(markdown: str, level: int = 2) -> dict[str, str]:
    parts = re.split(rf"^{'#' * level} ", markdown, flags=re.MULTILINE)
    return {part.split("\n", 1)[0].strip(): part for part in parts[1:]}


def _numeric_rows(section: str) -> list[list[str]]:
    """Table rows (not header or separator) whose cells after the first hold a number."""
    rows = []
    for line in section.splitlines():
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if any(_NUMBER.search(c) for c in cells[1:]):
            rows.append(cells)
    return rows


@pytest.mark.timeout(240)
def test_tiny_benchmark_reports_every_scenario(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    work = tmp_path / "work"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.run", "--tiny", "--no-warm-up",
         "--scenarios", ",".join(SCENARIOS), "--out", str(out), "--work-dir", str(work)],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=230,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = out.read_text()
    details = (tmp_path / "RESULTS-details.md").read_text()  # every scenario's tables
    assert "Scenarios that could not run" not in text
    assert "data checks failed" not in text + details  # the throughput run's models pass their checks
    assert "| CPU |" in text  # the machine is described
    assert "(RESULTS-details.md#latest-full-run)" in text
    sections = _sections(details, level=3)
    for key, title in SCENARIOS.items():
        assert title in sections, f"no section for {key}"
        rows = _numeric_rows(sections[title])
        assert rows, f"section {title!r} has no table with numbers"
        assert title in proc.stdout, f"{title!r} not printed to stdout"
    # the goals table lists a verdict for every goal
    assert re.search(r"\| (met|\*\*missed\*\*|not measured) \|", _sections(text)["Goals at a glance"])
    raw = json.loads((work / "results-tiny.json").read_text())
    assert set(raw) == set(SCENARIOS)
    # the baselines land the same rows as the sandbox's ground truth
    assert "same rows land" in sections[SCENARIOS["baselines"]]
    assert "same rows land" in text
