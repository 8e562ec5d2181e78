"""Where the suite's CPU goes: each test's CPU, its worker's own plus that of the
subprocesses it waited for (session fixtures count on their first test).

Opt-in, as a plugin::

    CENSUS_DIR=/tmp/census .venv/bin/pytest -p tests.census -n 3 --dist loadgroup
    .venv/bin/python -m tests.census /tmp/census        # the total, per file and per test

Each process writes one JSON line per test into ``CENSUS_DIR/<pid>.jsonl``.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    folder = os.environ.get("CENSUS_DIR")
    if not folder:
        return (yield)
    before = _cpu_seconds()
    try:
        return (yield)
    finally:
        Path(folder).mkdir(parents=True, exist_ok=True)
        line = {"test": item.nodeid.split("@", 1)[0], "cpu": round(_cpu_seconds() - before, 3)}
        with open(Path(folder) / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")


def summary(folder: Path, top: int = 40) -> str:
    """The census of one run: its total, then the costliest files and tests."""
    tests: Counter[str] = Counter()
    for path in sorted(folder.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            tests[record["test"]] += record["cpu"]
    files: Counter[str] = Counter()
    for test, cpu in tests.items():
        files[test.split("::", 1)[0]] += cpu
    lines = [f"{len(tests)} tests, {sum(tests.values()):,.0f} CPU s", "", "by file:"]
    lines += [f"{cpu:8.1f}  {name}" for name, cpu in sorted(files.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
    lines += ["", "by test:"]
    lines += [f"{cpu:8.1f}  {name}" for name, cpu in sorted(tests.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1])))
