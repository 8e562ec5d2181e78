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
