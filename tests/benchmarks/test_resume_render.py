"""`python -m benchmarks.resume` renders its runs: on one machine, and on another one
(`--machines`), where it also says how much of the killed machine's manifest the bucket
held."""

from __future__ import annotations

from typing import Any

from benchmarks.resume import kept_answers, render


def _run(full: int, killed: int, resumed: int, recorded: int | None = None,
         kept: int | None = None) -> dict[str, Any]:
    machines = recorded is not None
    return {"full": {"seconds": 30.0, "requests": full},
            "killed": {"seconds": 15.0, "requests": killed, **({"recorded": recorded} if machines else {})},
            "resumed": {"seconds": 27.0, "requests": resumed, **({"kept": kept} if machines else {})},
            "exact": True}


def test_on_one_machine_the_resumed_share_is_a_median_of_shares() -> None:
    runs = [_run(1000, 500, 530), _run(1000, 510, 560), _run(1000, 490, 550)]
    text = render({"scale": "medium", "rate_limit": 50.0, "kill_at": 0.5, "runs": runs})
    assert text.startswith("## Resuming an interrupted sync")
    assert "| resumed | 27.0 | 550 | **90%, 55%** |" in text
    assert "Goal: at most 55 %" in text and "yes, every run" in text


def test_on_another_machine_it_says_what_the_bucket_held_of_the_killed_manifest() -> None:
    runs = [_run(2500, 1250, 2300, recorded=1200, kept=180), _run(2500, 1260, 2330, recorded=1210, kept=150),
            _run(2500, 1240, 2250, recorded=1190, kept=250)]
    text = render({"connections": 400, "latency_ms": 200.0, "kill_at": 0.5, "heartbeat": 1.0,
                   "machines": True, "runs": runs})
    assert text.startswith("## Resuming on another machine")
    assert "--machines --connections 400 --latency-ms 200 --heartbeat 1 --repeat 3" in text
    assert "| resumed | 27.0 | 2,300 | **90%, 92%** |" in text
    assert "Goal: at most 60 %" in text
    assert "manifest held 1,200 answers (medians); the resumed sync found 180 of them" in text
    assert "resume_machines.json" in text


def test_the_kept_answers_are_read_from_each_namespaces_line() -> None:
    log = ("ok     ns-1: 122 requests, 1,527 rows received, 1 sync issue, 4.1s; resumed: 1,026 of 1,148 requests "
           "kept from 21:43\nok     ns-2: 1,187 requests; resumed: 7 of 1,194 requests kept from 21:43\n")
    assert kept_answers(log) == 1033
