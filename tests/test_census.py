"""The suite's CPU census (:mod:`tests.census`) adds up what each process wrote."""

from __future__ import annotations

import json
from pathlib import Path

from tests.census import summary


def test_the_census_adds_each_tests_cpu_by_file_and_by_test(tmp_path: Path) -> None:
    lines = {"1.jsonl": [("tests/a/test_x.py::test_one", 2.5), ("tests/a/test_x.py::test_two", 1.0)],
             "2.jsonl": [("tests/b/test_y.py::test_three", 4.0), ("tests/a/test_x.py::test_one", 0.5)]}
    for name, records in lines.items():
        (tmp_path / name).write_text("".join(json.dumps({"test": t, "cpu": c}) + "\n" for t, c in records))
    text = summary(tmp_path).splitlines()
    assert text[0] == "3 tests, 8 CPU s"
    by_file = text[text.index("by file:") + 1:text.index("by test:") - 1]
    assert [line.split() for line in by_file] == [["4.0", "tests/a/test_x.py"], ["4.0", "tests/b/test_y.py"]]
    by_test = text[text.index("by test:") + 1:]
    assert by_test[0].split() == ["4.0", "tests/b/test_y.py::test_three"]
    assert by_test[1].split() == ["3.0", "tests/a/test_x.py::test_one"]
