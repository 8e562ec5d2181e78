"""`diligence sandbox change`: a running sandbox's data changed as counterparties would
between syncs, so the change feed can be seen working on it (the README's walkthrough:
sync, change, sync, `diligence changes`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sandbox.changes import Changes, apply_changes
from sandbox.data import build_world
from sandbox.server import SandboxServer

from .helpers import CREDENTIALS, run

pytestmark = pytest.mark.slow


def test_changes_are_realistic_deterministic_and_said_one_per_line() -> None:
    one, two = build_world("small", seed=7), build_world("small", seed=7)
    asked = Changes(answers=3, documents=2, connections=1, template_field=True, key="registeredAt")
    lines = apply_changes(one, asked)
    assert lines == apply_changes(two, asked)  # the same seed changes alike
    kinds = [line.split(":")[0] for line in lines]
    assert kinds == ["answer changed"] * 3 + ["document renewed", "document now expires in 7 days",
                                               "connection removed", "question added to the "
                                               f"{sorted(one.templates)[0]} questionnaire",
                                               "the service now sends the company key 'registeredAt'"]
    assert one.changes_made == 1 and apply_changes(one, Changes(answers=1))[0].startswith("answer changed: ")
    with pytest.raises(ValueError, match="answers must be a whole number from 0 to 1000"):
        Changes.of({"answers": -1})


def test_a_second_sync_after_a_change_shows_it_in_the_feed(server: SandboxServer, tmp_path: Path) -> None:
    def diligence(*args: str) -> str:
        result = run(list(args), tmp_path, CREDENTIALS)
        assert result.returncode == 0, result.stderr
        return result.stdout

    diligence("sync", "--base-url", server.base_url, "-w", "w.duckdb")
    said = diligence("sandbox", "change", "--base-url", server.base_url, "--answers", "2", "--documents", "2",
                     "--connections", "1")
    assert said.count("answer changed: ") == 2 and "connection removed: " in said
    assert f"sync again to see them: diligence sync --base-url {server.base_url}" in said
    diligence("sync", "--base-url", server.base_url, "-w", "w.duckdb")
    kinds = {row["change_kind"] for row in json.loads(diligence("changes", "-w", "w.duckdb", "--json"))}
    assert {"answer_changed", "connection_removed"} <= kinds
    assert kinds & {"document_changed", "document_expiry_changed", "document_newly_expiring"}


def test_a_bad_change_exits_2(server: SandboxServer, tmp_path: Path) -> None:
    result = run(["sandbox", "change", "--base-url", server.base_url, "--answers", "-1"], tmp_path)
    assert result.returncode == 2
    result = run(["sandbox", "change", "--base-url", "http://127.0.0.1:9"], tmp_path)
    assert result.returncode == 1 and "cannot reach the sandbox at http://127.0.0.1:9" in result.stderr
