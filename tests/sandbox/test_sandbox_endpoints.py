"""Contract tests: endpoints 4-11 against the shared small sandbox."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

import httpx
import pytest

if TYPE_CHECKING:
    from conftest import Api

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")
UNKNOWN_ID = "00000000-0000-4000-8000-000000000000"


def _other_ns_only(truth: dict[str, Any], ns: str) -> str:
    """A company connected to another namespace but not to ``ns``."""
    mine = set(truth["per_namespace"][ns]["connection_ids"])
    for other, t in truth["per_namespace"].items():
        if other != ns:
            for company_id in t["connection_ids"]:
                if company_id not in mine and company_id != ns:
                    return str(company_id)
    raise AssertionError("no such company")


def _readable(truth: dict[str, Any], ns: str, connection: bool = True) -> tuple[str, str]:
    for company_id, type_id in truth["per_namespace"][ns]["questionnaires"]:
        if (company_id != ns) == connection:
            return company_id, type_id
    raise AssertionError("no readable pair")


# ---------------------------------------------------------------- 4, 5, 6

def test_company_details_own_connection_and_404(api: Api, truth: dict[str, Any], ns: str) -> None:
    own = api.get(f"/api/companies/{ns}", ns=ns)
    assert own.status_code == 200
    assert set(own.json()) == {"id", "name", "country", "city", "lei", "cin"}
    assert own.json()["id"] == ns
    assert re.fullmatch(r"[0-9A-Z]{18}\d\d", own.json()["lei"])
    connection = truth["per_namespace"][ns]["connection_ids"][0]
    detail = api.get(f"/api/companies/{connection}", ns=ns)
    assert detail.status_code == 200 and detail.json()["id"] == connection
    assert api.get(f"/api/companies/{_other_ns_only(truth, ns)}", ns=ns).status_code == 404
    assert api.get(f"/api/companies/{UNKNOWN_ID}", ns=ns).status_code == 404


def test_connections_is_a_bare_array_of_id_and_name(api: Api, truth: dict[str, Any],
                                                    ns: str) -> None:
    body = api.get("/api/companies/connections", ns=ns).json()
    assert isinstance(body, list)
    assert all(set(entry) == {"id", "name"} for entry in body)
    assert [e["id"] for e in body] == truth["per_namespace"][ns]["connection_ids"]
    other = truth["namespaces"][1]
    assert [e["id"] for e in api.get("/api/companies/connections", ns=other).json()] \
        == truth["per_namespace"][other]["connection_ids"]


def test_connection_detail_shape(api: Api, truth: dict[str, Any], ns: str) -> None:
    t = truth["per_namespace"][ns]
    company_id = next(c for c in t["connection_ids"] if c not in t["detail_404"])
    body = api.get(f"/api/companies/connections/{company_id}", ns=ns).json()
    assert set(body) == {"id", "name", "country", "readingRights"}
    rights = body["readingRights"]
    assert set(rights) == {"given", "received"}
    assert all(isinstance(x, str) for x in rights["given"]["companyTypeIds"])
    assert all(isinstance(x, str) for x in rights["received"]["companyTypeIds"])


def test_listed_connection_whose_detail_is_404(api: Api, truth: dict[str, Any], ns: str) -> None:
    (ghost,) = truth["per_namespace"][ns]["detail_404"]
    assert ghost in truth["per_namespace"][ns]["connection_ids"]
    assert api.get(f"/api/companies/connections/{ghost}", ns=ns).status_code == 404
    assert api.get(f"/api/companies/{ghost}", ns=ns).status_code == 200
    assert api.get(f"/api/companies/{ghost}/type/ct-supplier/questionnaires",
                   ns=ns).status_code == 404
    not_connected = _other_ns_only(truth, ns)
    assert api.get(f"/api/companies/connections/{not_connected}", ns=ns).status_code == 404


def test_connection_without_received_rights(api: Api, truth: dict[str, Any], ns: str) -> None:
    (company_id,) = truth["per_namespace"][ns]["no_received_rights"]
    body = api.get(f"/api/companies/connections/{company_id}", ns=ns).json()
    assert body["readingRights"]["received"]["companyTypeIds"] == []
    assert api.get(f"/api/companies/{company_id}/type/ct-supplier/questionnaires",
                   ns=ns).status_code == 403
    assert api.get(f"/api/companies/{company_id}/company-types/ct-supplier/documents",
                   ns=ns).status_code == 403


# ---------------------------------------------------------------- 7, 8, 9 rights

def test_reading_rights_are_enforced(api: Api, truth: dict[str, Any], ns: str) -> None:
    company_id, type_id = _readable(truth, ns)
    received = api.get(f"/api/companies/connections/{company_id}",
                       ns=ns).json()["readingRights"]["received"]["companyTypeIds"]
    assert type_id in received
    not_received = next(t["id"] for t in api.server.world.company_types
                        if t["id"] not in received)
    for path in (f"/api/companies/{company_id}/type/{not_received}/questionnaires",
                 f"/api/companies/{company_id}/company-types/{not_received}/documents"):
        assert api.get(path, ns=ns).status_code == 403
    stranger = _other_ns_only(truth, ns)
    for path in (f"/api/companies/{stranger}/type/{type_id}/questionnaires",
                 f"/api/companies/{stranger}/company-types/{type_id}/documents"):
        assert api.get(path, ns=ns).status_code == 404
    own_internal = truth["per_namespace"][ns]["internal_type_ids"]
    own_other = next(t["id"] for t in api.server.world.company_types
                     if t["id"] not in own_internal)
    assert api.get(f"/api/companies/{ns}/type/{own_internal[0]}/questionnaires",
                   ns=ns).status_code == 200
    assert api.get(f"/api/companies/{ns}/type/{own_other}/questionnaires",
                   ns=ns).status_code == 403


def _all_fields(api: Api, truth: dict[str, Any], ns: str) -> list[dict[str, Any]]:
    fields = []
    for company_id, type_id in truth["per_namespace"][ns]["questionnaires"]:
        body = api.get(f"/api/companies/{company_id}/type/{type_id}/questionnaires", ns=ns).json()
        for form in body["questionnaires"]["forms"]:
            fields.extend(form["fields"])
    return fields


def test_questionnaire_shapes_per_field_type(api: Api, truth: dict[str, Any], ns: str) -> None:
    company_id, type_id = _readable(truth, ns)
    body = api.get(f"/api/companies/{company_id}/type/{type_id}/questionnaires", ns=ns).json()
    assert set(body) == {"questionnaires"} and set(body["questionnaires"]) == {"forms"}
    for form in body["questionnaires"]["forms"]:
        assert set(form) == {"id", "label", "fields"}
        for field in form["fields"]:
            assert set(field) <= {"id", "type", "label", "options", "information"}
    fields = _all_fields(api, truth, ns)
    by_type: dict[str, list[dict[str, Any]]] = {}
    for field in fields:
        by_type.setdefault(field["type"], []).append(field)
    assert set(by_type) == {"Label", "Input", "Dropdown", "Checkbox"}
    for label in by_type["Label"]:
        assert "options" not in label and "information" not in label
    for field in by_type["Input"]:
        assert "options" not in field
        if "information" in field:
            assert set(field["information"]) == {"value"}
            assert isinstance(field["information"]["value"], str)
    for kind in ("Dropdown", "Checkbox"):
        for field in by_type[kind]:
            option_ids = {o["id"] for o in field["options"]}
            assert all(set(o) == {"id", "value"} for o in field["options"])
            if "information" in field:
                chosen = field["information"]["options"]
                assert set(field["information"]) == {"options"}
                assert {o["id"] for o in chosen} <= option_ids
                assert len(chosen) == 1 if kind == "Dropdown" else len(chosen) >= 1
    multi = [f for f in by_type["Checkbox"] if len(f.get("information", {}).get("options", [])) > 1]
    answered_checkboxes = [f for f in by_type["Checkbox"] if "information" in f]
    assert len(multi) >= len(answered_checkboxes) // 3
    assert any("information" not in f for f in fields if f["type"] != "Label")


def test_template_has_no_information(api: Api, truth: dict[str, Any], ns: str) -> None:
    company_id, type_id = _readable(truth, ns)
    template = api.get(f"/api/company-type/{type_id}/questionnaires", ns=ns)
    assert template.status_code == 200
    assert b"information" not in template.content
    answered = api.get(f"/api/companies/{company_id}/type/{type_id}/questionnaires", ns=ns).json()
    for form in answered["questionnaires"]["forms"]:
        for field in form["fields"]:
            field.pop("information", None)
    assert template.json() == answered
    assert api.get("/api/company-type/ct-public-authority/questionnaires",
                   ns=ns).status_code == 403
    assert api.get("/api/company-type/no-such-type/questionnaires", ns=ns).status_code == 403


def test_field_information(api: Api, truth: dict[str, Any], ns: str) -> None:
    company_id, type_id = _readable(truth, ns)
    body = api.get(f"/api/companies/{company_id}/type/{type_id}/questionnaires", ns=ns).json()
    fields = [f for form in body["questionnaires"]["forms"] for f in form["fields"]]
    answered = [f for f in fields if "information" in f]
    unanswered = [f for f in fields if "information" not in f]
    assert answered and unanswered
    for field in answered[:5]:
        response = api.get(f"/api/companies/{company_id}/field/{field['id']}/information", ns=ns)
        assert response.status_code == 200
        assert response.json() == {"information": field["information"]}
    for field in unanswered[:3]:
        assert api.get(f"/api/companies/{company_id}/field/{field['id']}/information",
                       ns=ns).status_code == 404
    assert api.get(f"/api/companies/{company_id}/field/fld-unknown/information",
                   ns=ns).status_code == 404
    stranger = _other_ns_only(truth, ns)
    assert api.get(f"/api/companies/{stranger}/field/{answered[0]['id']}/information",
                   ns=ns).status_code == 404


# ---------------------------------------------------------------- 10, 11

def _documents(api: Api, truth: dict[str, Any], ns: str) -> list[dict[str, Any]]:
    docs = []
    for company_id, type_id in truth["per_namespace"][ns]["questionnaires"]:
        body = api.get(f"/api/companies/{company_id}/company-types/{type_id}/documents", ns=ns)
        assert body.status_code == 200
        assert isinstance(body.json(), list)
        docs.extend(body.json())
    return docs


def test_documents_bare_array_with_timestamps(api: Api, truth: dict[str, Any], ns: str) -> None:
    docs = _documents(api, truth, ns)
    assert len(docs) == truth["per_namespace"][ns]["documents"]["total"]
    for doc in docs:
        assert set(doc) == {"id", "name", "category", "type", "issueDate", "expirationDate"}
        assert TIMESTAMP.match(doc["issueDate"]) and TIMESTAMP.match(doc["expirationDate"])
        assert doc["issueDate"] < doc["expirationDate"]
    counts = truth["per_namespace"][ns]["documents"]
    assert counts["expired"] > 0 and counts["expiring_30d"] > 0
    assert counts["total"] - counts["expired"] - counts["expiring_30d"] > counts["total"] // 2


def test_document_url_downloads_without_bearer(api: Api, truth: dict[str, Any], ns: str) -> None:
    doc = _documents(api, truth, ns)[0]
    response = api.get(f"/api/documents/{doc['id']}/url", ns=ns)
    assert response.status_code == 200
    url = response.json()["url"]
    assert url.startswith(f"{api.server.base_url}/_files/{doc['id']}?expires=")
    first, second = httpx.get(url), httpx.get(url)
    assert first.status_code == 200 and first.content.startswith(b"%PDF")
    assert first.content == second.content
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    tampered = urlunsplit(parts._replace(query=f"expires={int(query['expires'][0]) + 1000}"
                                              f"&sig={query['sig'][0]}"))
    assert httpx.get(tampered).status_code == 403
    assert httpx.get(url.replace(doc["id"], UNKNOWN_ID)).status_code == 403
    assert api.get(f"/api/documents/{UNKNOWN_ID}/url", ns=ns).status_code == 404


def test_signed_url_expires(make_api: Callable[..., Api]) -> None:
    api = make_api(url_ttl_seconds=1)
    truth = api.truth()
    ns = truth["namespaces"][0]
    doc = _documents(api, truth, ns)[0]
    url = api.get(f"/api/documents/{doc['id']}/url", ns=ns).json()["url"]
    assert httpx.get(url).status_code == 200
    time.sleep(2.1)
    expired = httpx.get(url)
    assert expired.status_code == 403
    assert "expired" in expired.json()["message"]


def test_document_url_rights(api: Api, truth: dict[str, Any]) -> None:
    ns, other = truth["namespaces"][:2]
    mine = {c for c, _ in truth["per_namespace"][ns]["questionnaires"]}
    company_id, type_id = next((c, t) for c, t in truth["per_namespace"][other]["questionnaires"]
                               if c not in mine and c != other)
    docs = api.get(f"/api/companies/{company_id}/company-types/{type_id}/documents",
                   ns=other).json()
    if not docs:
        pytest.skip("pair without documents")
    assert api.get(f"/api/documents/{docs[0]['id']}/url", ns=other).status_code == 200
    assert api.get(f"/api/documents/{docs[0]['id']}/url", ns=ns).status_code in (403, 404)


# ---------------------------------------------------------------- routing

def test_wrong_method_and_unknown_routes(api: Api, ns: str) -> None:
    assert api.client.post("/api/companies/connections", headers=api.headers(ns)).status_code == 405
    assert api.client.get("/api/auth").status_code == 405
    assert api.get("/api/nothing/here", ns=ns).status_code == 404
    assert api.client.get("/elsewhere").status_code == 404
    assert api.client.get("/api/auth/token").json()["message"]
