"""`make test` groups the tests for its workers (``--dist loadgroup``, see
:data:`tests.conftest.WHOLE_FOLDERS`): the groups must reach pytest-xdist."""

from __future__ import annotations

import pytest


def test_the_group_of_a_test_reaches_xdist(request: pytest.FixtureRequest) -> None:
    """Under ``--dist loadgroup`` xdist schedules by the group it appends to the node ID.
    On a pytest it cannot do that for (pytest-dev/pytest-xdist#1386), every test would
    be scheduled alone and each worker would make every shared fixture again."""
    if not request.config.getoption("loadgroup", default=False):
        pytest.skip("runs under `make test` (pytest -n 3 --dist loadgroup)")
    assert request.node.nodeid.endswith("@tests/test_suite_groups.py")


def test_the_longest_groups_are_handed_out_first(request: pytest.FixtureRequest) -> None:
    """The collection starts with the folders that take minutes, then the files with
    `slow` tests, then the rest (``--no-loadscope-reorder`` keeps that order)."""
    from tests.conftest import LONGEST_GROUPS

    groups: dict[str, bool] = {}  # group -> has a slow test, in the collection's order
    for item in request.session.items:
        group = next(marker.args[0] for marker in item.iter_markers("xdist_group"))
        groups[group] = groups.get(group, False) or item.get_closest_marker("slow") is not None
    order = list(groups)
    longest = [group for group in LONGEST_GROUPS if group in groups]
    assert order[:len(longest)] == longest
    rest = [groups[group] for group in order[len(longest):]]
    assert rest == sorted(rest, reverse=True), "a group with slow tests comes after a quick one"
