"""Smoke test of `python -m benchmarks.cli`: one repetition on a tiny account, every
contender a real process against a real sandbox; the table has every figure. No timing is
asserted (the machine is shared).

Marked `bench` (about a minute of CPU: four `diligence sync` processes, two with dbt), so
it is out of the default run; `make bench-smoke` runs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.bench]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_a_tiny_run_times_every_contender(tmp_path: Path) -> None:
    out = tmp_path / "RESULTS.md"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.cli", "--connections", "20", "--memory", "10", "20",
         "--repeat", "1", "--latency-ms", "10", "--no-warm-up", "--out", str(out),
         "--work-dir", str(tmp_path / "work")],
        check=False, cwd=ROOT, capture_output=True, text=True, timeout=290,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = out.read_text()
    assert "<!-- cli:start -->" in text and "cli-history" not in text  # one repetition: not recorded
    for label in ("`sync --no-models` / bare replay", "whole `sync` time / `--no-models` time",
                  "evidence:", "peak RSS of the whole `sync`, 20 / 10 connections"):
        assert label in text, label
    details = (tmp_path / "RESULTS-details.md").read_text()  # every contender's times
    assert "| 20 (147) | `diligence sync --no-models`, evidence off |" in details
    raw = json.loads((tmp_path / "work" / "cli.json").read_text())
    assert set(raw["figures"]) == {"10", "20"}
    runs = raw["figures"]["20"]
    assert set(runs) == {"replay", "no_models", "whole", "no_evidence"}
    # the sync and the replay sent the same requests (the replay's login aside)
    assert runs["no_models"][0]["served"] == runs["replay"][0]["served"]
    assert runs["whole"][0]["models"] > 0 and runs["no_models"][0]["models"] == 0
    assert not list((tmp_path / "work" / "runs").glob("*/warehouse"))  # warehouses removed
