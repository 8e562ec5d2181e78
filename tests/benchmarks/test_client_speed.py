"""The client-speed benchmark's summaries: py-spy shares and the markdown section."""

from __future__ import annotations

from pathlib import Path

from benchmarks.client_speed import render, summarize_profile


def test_profile_summary_counts_only_the_fetch(tmp_path: Path) -> None:
    raw = tmp_path / "raw.txt"
    raw.write_text(
        "main (w.py:1);Runner.run (asyncio/runners.py:118);"
        "handle (aiohttp/client.py:9) 30\n"
        "main (w.py:1);Runner.run (asyncio/runners.py:118);_send (pipelines/x/client.py:4) 10\n"
        "main (w.py:1);Pipeline.run (dlt/pipeline/pipeline.py:828) 60\n"
    )
    summary = summarize_profile(raw)
    assert summary["fetch_samples"] == 40 and summary["all_samples"] == 100
    assert summary["self_share_pct"] == [("aiohttp", 75.0), ("pipelines", 25.0)]


def test_render_reports_medians_and_ratios() -> None:
    def run(cpu: float, rps: float) -> dict[str, float]:
        return {"cpu_ms": cpu, "fetch_rps": rps * 2, "rps": rps, "fetch_s": 1.0, "sync_s": 2.0,
                "requests": 100, "failed": 0}

    results = {
        "fetch": {"before": [run(2.0, 100), run(3.0, 90), run(2.5, 95)],
                  "after": [run(0.5, 300), run(0.6, 280), run(0.7, 310)]},
        "rest_api": {"0": {"ours": [1.0, 2.0, 1.5], "rest_api": [8.0, 10.0, 9.0]}},
    }
    text = render(results)
    assert "| client CPU ms per request during the fetch | 2.50 | 0.60 | 0.24x |" in text
    assert "| requests/s end to end (login to last row loaded) | 95 | 300 | 3.16x |" in text
    assert "median **6.0x** (8.0 / 5.0 / 6.0)" in text
