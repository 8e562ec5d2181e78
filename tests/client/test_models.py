"""Models keep what they do not know and tolerate missing or null optional keys."""

from __future__ import annotations

import orjson
import pytest

from pipelines.company_connections.models import (
    ConnectionDetail,
    Document,
    Questionnaire,
    UserInfo,
)

FORMS = [
    {
        "id": "f1", "label": "Sustainability", "layout": {"columns": 2},
        "fields": [
            {"id": "x1", "type": "MatrixRating", "label": "Rate us", "scale": [1, 5],
             "information": {"rows": [{"id": "r1", "rating": 4}]}},
            {"id": "c1", "type": "Checkbox", "label": "Certs", "required": True,
             "options": [{"id": "o1", "value": "ISO", "color": "red"}],
             "information": {"values": ["o1"]}},
            {"id": "i1", "type": "Input", "label": "Free", "information": "bare string"},
            {"id": "n1", "label": None, "options": None},
        ],
    },
    {"id": "f2", "label": "Empty", "fields": None},
]


def test_unknown_field_types_and_extra_properties_survive_into_raw_forms() -> None:
    body = orjson.loads(orjson.dumps({"questionnaires": {"forms": FORMS, "version": 3}}))
    questionnaire = Questionnaire.from_body(body)
    assert questionnaire.raw_forms == FORMS
    assert orjson.loads(orjson.dumps(questionnaire.raw_forms)) == FORMS  # JSON-able as is
    matrix, checkbox, text, untyped = questionnaire.forms[0].fields
    assert matrix.type == "MatrixRating" and matrix.model_extra == {"scale": [1, 5]}
    assert matrix.information == {"rows": [{"id": "r1", "rating": 4}]}
    assert checkbox.model_extra == {"required": True}
    assert checkbox.options[0].model_extra == {"color": "red"}
    assert checkbox.information == {"values": ["o1"]}
    assert text.information == {"value": "bare string"}
    assert untyped.type is None and untyped.options is None
    assert questionnaire.forms[0].model_extra == {"layout": {"columns": 2}}
    assert questionnaire.forms[1].fields == []


@pytest.mark.parametrize("body", [
    {"questionnaires": None}, {"questionnaires": {}}, {"questionnaires": {"forms": None}},
])
def test_empty_questionnaire(body) -> None:
    assert Questionnaire.from_body(body).forms == []


@pytest.mark.parametrize("body", [[], {"other": 1}, {"questionnaires": []},
                                  {"questionnaires": {"forms": {}}}])
def test_questionnaire_shape_errors(body) -> None:
    with pytest.raises((TypeError, ValueError)):
        Questionnaire.from_body(body)


def test_missing_and_null_optionals() -> None:
    assert UserInfo.model_validate({}).roles == []
    assert UserInfo.model_validate({"roles": None}).company_ids == []
    detail = ConnectionDetail.model_validate(
        {"id": "c", "readingRights": {"given": None, "received": {"companyTypeIds": None}}})
    assert detail.reading_rights.given.company_type_ids == []
    assert detail.reading_rights.received.company_type_ids == []
    doc = Document.model_validate({"id": 7, "expirationDate": None, "tags": ["a"]})
    assert doc.id == "7" and doc.expiration_date is None
    assert doc.raw == {"id": 7, "expirationDate": None, "tags": ["a"]}


def test_python_names_are_accepted_too() -> None:
    detail = ConnectionDetail(id="c", reading_rights={"given": {"company_type_ids": ["t"]}})
    assert detail.reading_rights.given.company_type_ids == ["t"]
    assert detail.model_dump(by_alias=True)["readingRights"]["given"]["companyTypeIds"] == ["t"]
