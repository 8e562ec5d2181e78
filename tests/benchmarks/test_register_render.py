"""The register benchmark's table: medians of the daily build and of the register, and
their ratio against the goal."""

from __future__ import annotations

from benchmarks.register import render


def test_medians_and_the_ratio_of_register_to_daily_build() -> None:
    present = [{"wall": w, "peak_mb": 600.0} for w in (50.0, 40.0, 60.0)]
    register = [{"wall": w, "peak_mb": 900.0} for w in (70.0, 55.0, 90.0)]
    results = {"machine": {"cpu": "2 cores", "date": "2026-11-29", "load_average": "1", "load_before": "1"},
               "repeat": 3, "register": {"syncs": 50, "questionnaire_versions": 20_000,
                                         "as_of": "2026-01-05T06:00:00", "runs": {"present": present,
                                                                                 "register": register}}}
    text = render(results)
    assert "| daily (`models`) | 50.0 s | 600 MB |" in text
    assert "| register (`models --as-of --out`) | 70.0 s | 900 MB |" in text
    assert "Register / daily build: **1.40x** (goal <= 1.5x)." in text
