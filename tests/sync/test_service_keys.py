"""`raw.service_keys` names, for each key path, a response that had it; concurrent
responses arrive in any order, and a replay of the same responses must name the same one."""

from __future__ import annotations

import itertools

from pipelines.company_connections.keys import KeysSeen

RESPONSES = [
    ("questionnaire", {"id": "q1", "questionnaires": [{"forms": []}]}, "c" * 64),
    ("questionnaire", {"id": "q2", "questionnaires": [{"forms": [{"id": "f"}]}]}, "a" * 64),
    ("questionnaire", {"id": "q3", "questionnaires": [], "extra": 1}, "b" * 64),
]
ITEMS = [({"id": "d1", "name": "x"}, "f" * 64), ({"id": "d2", "name": "y", "note": "z"}, "e" * 64)]


def _rows(order: tuple[int, ...], item_order: tuple[int, ...]) -> list[dict[str, object]]:
    keys = KeysSeen()
    for i in order:
        keys.see(*RESPONSES[i])
    items = [ITEMS[i] for i in item_order]
    keys.see_items("documents", [item for item, _ in items], [response for _, response in items])
    return keys.rows("ns")


def test_the_response_of_a_key_does_not_depend_on_the_order_responses_arrive_in() -> None:
    expected = _rows((0, 1, 2), (0, 1))
    for order in itertools.permutations(range(3)):
        for item_order in itertools.permutations(range(2)):
            assert _rows(order, item_order) == expected
    named = {(row["endpoint"], row["key_path"]): row["response_sha256"] for row in expected}
    # the least sha256 of the responses that had the key
    assert named["questionnaire", "questionnaires"] == "a" * 64
    assert named["questionnaire", "questionnaires[].forms[].id"] == "a" * 64
    assert named["questionnaire", "extra"] == "b" * 64
    assert named["documents", "name"] == "e" * 64
    assert named["documents", "note"] == "e" * 64


def test_without_evidence_no_response_is_named() -> None:
    keys = KeysSeen()
    keys.see("company", {"id": "c", "name": "n"}, None)
    keys.see("company", {"id": "c", "lei": "l"}, None)
    assert {row["key_path"]: row["response_sha256"] for row in keys.rows("ns")} == {
        "id": None, "name": None, "lei": None}
