"""The growth benchmark's small-world part: side-by-side medians and ratios per command,
and the file's growth against the raw data's."""

from __future__ import annotations

from benchmarks.growth import COMMANDS, render


def _run(bytes_: int, rows: int, raw_bytes: int) -> dict[str, object]:
    return {"wall": 10.0, "bytes": bytes_, "raw_rows": rows, "raw_bytes": raw_bytes, "free_blocks": 4,
            "used_blocks": 60, "published_bytes": 7_000_000}


def test_small_part_gives_medians_ratios_and_the_file_against_its_data() -> None:
    timed = {"second": {c: [2.0, 1.0, 3.0] for c in COMMANDS}, "last": {c: [2.2, 9.0, 2.4] for c in COMMANDS}}
    runs = [_run(20_000_000, 500, 1_000_000), _run(21_000_000, 530, 1_150_000), _run(23_000_000, 1_530, 5_150_000)]
    results = {"machine": {"cpu": "2 cores", "date": "2026-11-29", "load_average": "1", "load_before": "1"},
               "repeat": 3, "small": {"syncs": 3, "runs": {"after": runs}, "side_by_side": {"after": timed}}}
    text = render(results)
    for command in COMMANDS:  # medians 2.0 and 2.4
        assert f"| after | `{command}` | 2.00 s | 2.40 s | 1.20x |" in text
    # 2 MB over 1,000 rows, against 4 MB of raw data: the file grew half as fast as its data
    assert "| after | 21.0 -> 23.0 MB | 1,000 | 2,000 | 4,000 | 0.5x | 4 of 64 | - | 0 | 7.0 -> 7.0 MB |" in text


def test_small_part_fits_the_files_growth_after_its_first_syncs() -> None:
    """From the 10th sync on: the file +100 KB per sync against +300 KB of raw data, a
    compaction counted wherever a models run made one."""
    runs = [_run(20_000_000 + 100_000 * n, 500 + 10 * n, 1_000_000 + 300_000 * n) for n in range(1, 13)]
    runs[4]["compacted"] = True
    results = {"machine": {"cpu": "2 cores", "date": "2026-11-29", "load_average": "1", "load_before": "1"},
               "repeat": 3, "small": {"syncs": 12, "runs": {"after": runs}, "side_by_side": {}}}
    assert "| 4 of 64 | 100 KB / 300 KB | 1 | 7.0 -> 7.0 MB |" in render(results)
