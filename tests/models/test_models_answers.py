"""Flattening questionnaires into analytics.answers, and completeness."""

from __future__ import annotations

from pathlib import Path

import pytest

from diligence.analytics.models import build_models

from .helpers import by, rows
from .rawdb import (
    AS_OF,
    company,
    connection,
    create_raw,
    field,
    form,
    insert,
    options,
    questionnaire,
)

NS = "ns"
#: the namespaces of the completeness and the malformed-forms scenarios, built beside NS's
COMPLETENESS_NS = "ns-completeness"
MALFORMED_NS = "ns-malformed"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three scenarios of this file, a namespace each, in one raw layer built once
    (read-only): every field shape (NS), completeness counts, malformed forms."""
    path = create_raw(tmp_path_factory.mktemp("answers") / "warehouse.duckdb")
    _field_shapes_raw(path)
    _completeness_raw(path)
    _malformed_raw(path)
    build_models(path, as_of=AS_OF)
    return path


@pytest.fixture(scope="module")
def answers(built: Path) -> dict[str, dict]:
    return by("field_id", rows(built, "select * from analytics.answers where namespace_company_id = ?", [NS]))


def _field_shapes_raw(path: Path) -> None:
    insert(path, "companies", [company(NS, NS, "Self"), company(NS, "c1", "Acme")])
    insert(path, "connections", [connection(NS, "c1", "Acme")])
    fields = [
        field("label", "Label", "Section A"),
        field("input", "Input", "Legal name", {"value": "Acme AS"}),
        field(
            "dropdown",
            "Dropdown",
            "Size",
            {"options": [{"id": "o2", "value": "Large"}]},
            options("Small", "Large"),
        ),
        field(
            "check_one",
            "Checkbox",
            "Certified",
            {"options": [{"id": "o1", "value": "ISO"}]},
            options("ISO", "SOC2", "PCI"),
        ),
        field(
            "check_many",
            "Checkbox",
            "Certifications",
            {"options": [{"id": "o1", "value": "ISO"}, {"id": "o3", "value": "PCI"}]},
            options("ISO", "SOC2", "PCI"),
        ),
        field(
            "check_id_only",
            "Checkbox",
            "By id",
            {"options": [{"id": "o2"}]},
            options("ISO", "SOC2"),
        ),
        field("check_value", "Checkbox", "As value", {"value": "SOC2"}, options("ISO", "SOC2")),
        field(
            "check_values",
            "Checkbox",
            "As values",
            {"values": ["ISO", "SOC2"]},
            options("ISO", "SOC2"),
        ),
        field("unanswered", "Input", "Website"),
        field("null_info", "Input", "Null information", information=None),
        field("empty_value", "Input", "Empty", {"value": ""}),
        field("empty_selection", "Checkbox", "Nothing", {"options": []}, options("ISO")),
        field("date", "DatePicker", "Founded", {"value": "2026-01-01", "extra": {"x": 1}}),
        field("multi", "MultiSelect", "Regions", {"values": ["EU", "US"]}),
        field("no_options", "Dropdown", "No options", None, []),
        field("extra_props", "Input", "Extra", {"value": "x"}, required=True, hint={"a": [1]}),
        field("odd", "Geo", "Odd shape", {"lat": 1.5}),
        field("whitespace", "Input", "Only spaces", {"value": "  \t "}),
        field(
            "unknown_option",
            "Dropdown",
            "Unknown option",
            {"options": [{"id": "o9"}]},
            options("Small", "Large"),
        ),
        field(
            "known_and_unknown",
            "Checkbox",
            "Known and unknown",
            {"options": [{"id": "o1"}, {"id": "zz"}]},
            options("ISO", "SOC2"),
        ),
    ]
    forms = [
        form("f1", "General", *fields[:9]),
        {**form("f2", "More", *fields[9:]), "description": "unknown form property"},
    ]
    questionnaire_row = questionnaire(NS, "c1", "t1", forms)
    # an explicit JSON null information, which json.dumps of a dict without the key cannot give
    questionnaire_row["forms_json"] = questionnaire_row["forms_json"].replace(
        '"label": "Null information"', '"label": "Null information", "information": null'
    )
    assert '"information": null' in questionnaire_row["forms_json"]
    insert(path, "questionnaires", [questionnaire_row])


def test_labels_are_excluded(answers: dict[str, dict]) -> None:
    assert "label" not in answers
    assert len(answers) == 19


def test_input(answers: dict[str, dict]) -> None:
    a = answers["input"]
    assert (a["is_answered"], a["answer_text"]) == (True, "Acme AS")
    assert (a["selected_option_ids"], a["selected_option_values"]) == ([], [])
    assert a["company_name"] == "Acme"
    assert (a["form_id"], a["form_label"], a["field_label"], a["field_type"]) == (
        "f1",
        "General",
        "Legal name",
        "Input",
    )


def test_dropdown(answers: dict[str, dict]) -> None:
    a = answers["dropdown"]
    assert a["answer_text"] == "Large"
    assert (a["selected_option_ids"], a["selected_option_values"]) == (["o2"], ["Large"])


def test_checkbox_single_and_multi(answers: dict[str, dict]) -> None:
    assert answers["check_one"]["answer_text"] == "ISO"
    assert answers["check_one"]["selected_option_ids"] == ["o1"]
    many = answers["check_many"]
    assert many["answer_text"] == "ISO; PCI"
    assert many["selected_option_ids"] == ["o1", "o3"]
    assert many["selected_option_values"] == ["ISO", "PCI"]


def test_checkbox_tolerant_shapes(answers: dict[str, dict]) -> None:
    by_id = answers["check_id_only"]
    assert (by_id["answer_text"], by_id["selected_option_values"]) == ("SOC2", ["SOC2"])
    value = answers["check_value"]
    assert (value["answer_text"], value["selected_option_ids"]) == ("SOC2", ["o2"])
    values = answers["check_values"]
    assert values["answer_text"] == "ISO; SOC2"
    assert values["selected_option_ids"] == ["o1", "o2"]
    assert values["selected_option_values"] == ["ISO", "SOC2"]


@pytest.mark.parametrize(
    "field_id",
    ["unanswered", "null_info", "empty_value", "empty_selection", "no_options", "whitespace"],
)
def test_unanswered(answers: dict[str, dict], field_id: str) -> None:
    a = answers[field_id]
    assert a["is_answered"] is False
    assert a["answer_text"] is None
    assert a["selected_option_ids"] is None and a["selected_option_values"] is None


def test_unknown_option_ids_stay_answered(answers: dict[str, dict]) -> None:
    unknown = answers["unknown_option"]
    assert (unknown["is_answered"], unknown["answer_text"]) == (True, "o9")
    assert (unknown["selected_option_ids"], unknown["selected_option_values"]) == (["o9"], [])
    mixed = answers["known_and_unknown"]
    assert (mixed["is_answered"], mixed["answer_text"]) == (True, "ISO; zz")
    assert mixed["selected_option_ids"] == ["o1", "zz"]
    assert mixed["selected_option_values"] == ["ISO"]


def test_unanswered_keeps_raw_answer_json(answers: dict[str, dict]) -> None:
    assert answers["unanswered"]["answer_json"] is None
    assert answers["null_info"]["answer_json"] is None
    assert answers["empty_value"]["answer_json"] == '{"value":""}'


def test_unknown_types_pass_through(answers: dict[str, dict]) -> None:
    date = answers["date"]
    assert (date["field_type"], date["answer_text"]) == ("DatePicker", "2026-01-01")
    assert date["selected_option_ids"] == []
    multi = answers["multi"]
    assert (multi["field_type"], multi["answer_text"]) == ("MultiSelect", "EU; US")
    assert multi["selected_option_values"] == []
    odd = answers["odd"]
    assert (odd["is_answered"], odd["answer_text"]) == (True, '{"lat":1.5}')


def test_extra_properties_are_ignored(answers: dict[str, dict]) -> None:
    assert answers["extra_props"]["answer_text"] == "x"
    assert answers["extra_props"]["form_label"] == "More"


def test_positions(answers: dict[str, dict]) -> None:
    assert (answers["input"]["form_position"], answers["input"]["field_position"]) == (1, 2)
    assert (answers["null_info"]["form_position"], answers["null_info"]["field_position"]) == (2, 1)


def _completeness_raw(path: Path) -> None:
    ns = COMPLETENESS_NS
    insert(path, "connections", [connection(ns, "c1", "Acme"), connection(ns, "c2", "Bravo")])
    insert(
        path,
        "questionnaires",
        [
            questionnaire(
                ns,
                "c1",
                "t1",
                [
                    form(
                        "f",
                        "F",
                        field("h", "Label", "Heading"),
                        field("a", "Input", "A", {"value": "1"}),
                        field("b", "Input", "B"),
                        field("c", "Checkbox", "C", {"options": [{"id": "o1", "value": "x"}]}),
                    )
                ],
            ),
            questionnaire(ns, "c2", "t1", [form("f", "F", field("h", "Label", "Only a label"))]),
            questionnaire(ns, "c2", "t2", []),
        ],
    )


def test_completeness_counts(built: Path) -> None:
    result = {
        (r["company_id"], r["company_type_id"]): r
        for r in rows(built, "select * from analytics.questionnaire_completeness where namespace_company_id = ?",
                      [COMPLETENESS_NS])
    }
    assert len(result) == 3
    full = result[("c1", "t1")]
    assert (full["answerable_fields"], full["answered_fields"]) == (3, 2)
    assert full["completeness_pct"] == pytest.approx(66.7)
    for key in [("c2", "t1"), ("c2", "t2")]:
        empty = result[key]
        assert (empty["answerable_fields"], empty["answered_fields"]) == (0, 0)
        assert empty["completeness_pct"] is None
    assert full["company_name"] is None  # no company details were read


def _malformed_raw(path: Path) -> None:
    ns = MALFORMED_NS
    odd_forms = (
        '[null, "x", {"id": 1, "fields": [null, {"id": "f", "type": 5, '
        '"options": [null, "s", {"id": 2}], "information": [1, 2]}]}]'
    )
    insert(
        path,
        "questionnaires",
        [
            questionnaire(ns, ns, "t1", odd_forms),
            questionnaire(ns, ns, "t2", '{"not": "a list"}'),
            questionnaire(ns, ns, "t3", "null"),
            questionnaire(ns, ns, "t4", '[{"id": "f", "fields": {}}]'),
        ],
    )


def test_malformed_forms_do_not_fail_the_build(built: Path) -> None:
    """The build of `built` ran with them; they are read as far as they make sense."""
    completeness = rows(built, "select * from analytics.questionnaire_completeness where namespace_company_id = ?",
                        [MALFORMED_NS])
    assert len(completeness) == 4
    [answer] = rows(built, "select * from analytics.answers where namespace_company_id = ?", [MALFORMED_NS])
    assert (answer["form_id"], answer["form_position"], answer["field_position"]) == ("1", 3, 2)
    assert (answer["field_type"], answer["answer_text"]) == ("5", "1; 2")
