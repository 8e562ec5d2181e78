"""The register benchmark's table: medians of the daily build and of the register, and
their ratio against the goal."""

from __future__ import annotations

from benchmarks.register import render


def test_medians_and_the_ratio_of_register_to_daily_build() -> None:
    present = [{"wall": w, "peak_mb": 600.0} for w in (50.0, 40.0, 60.0)]
    middle = [{"wall": w, "peak_mb": 700.0} for w in (40.0, 45.0, 35.0)]
    last = [{"wall": w, "peak_mb": 900.0} for w in (70.0, 55.0, 90.0)]
    results = {"machine": {"cpu": "2 cores", "date": "2026-11-29", "load_average": "1", "load_before": "1"},
               "repeat": 3, "register": {"syncs": 50, "questionnaire_versions": 20_000,
                                         "moments": {"middle": "2025-12-16T18:00:00", "last": "2026-01-10T07:00:00"},
                                         "runs": {"present": present, "middle": middle, "last": last}}}
    text = render(results)
    assert "| daily (`models`) | 50.0 s | 600 MB | 1.00x |" in text
    assert "| register as of 2025-12-16T18:00:00 (the middle of the history) | 40.0 s | 700 MB | 0.80x |" in text
    assert "| register as of 2026-01-10T07:00:00 (the last sync, every version) | 70.0 s | 900 MB | 1.40x |" in text
    assert "Register / daily build: at most **1.40x** (goal <= 1.5x)." in text
