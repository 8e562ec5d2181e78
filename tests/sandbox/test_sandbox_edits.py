"""The admin routes that edit the sandbox's world between two syncs (the change feed's
tests use them): each edit shows through the public endpoints, bad bodies answer 400
and unknown ids 404."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from conftest import Api


@pytest.fixture
def api(make_api: Callable[..., Api]) -> Api:
    """A sandbox of its own: these tests change the world."""
    client = make_api(scale="small", seed=7)
    client.token = client.login()
    return client


def _namespaces(api: Api) -> list[str]:
    return [str(ns) for ns in api.truth()["namespaces"]]


def _listed(api: Api, ns: str) -> list[str]:
    return [entry["id"] for entry in api.get("/api/companies/connections", ns).json()]


def test_a_connection_ends_and_another_begins_with_its_rights(api: Api) -> None:
    ns, other = _namespaces(api)[:2]
    ended = _listed(api, ns)[0]
    assert api.admin("connections", {"namespace": ns, "company_id": ended, "remove": True}).status_code == 200
    assert ended not in _listed(api, ns)
    assert api.get(f"/api/companies/connections/{ended}", ns).status_code == 404

    newcomer = next(c for c in _listed(api, other) if c not in _listed(api, ns) and c != ns)
    answer = api.admin("connections", {"namespace": ns, "company_id": newcomer, "received": ["ct-supplier"],
                                       "given": ["ct-customer"]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["connection"]["readingRights"] == {
        "given": {"companyTypeIds": ["ct-customer"]}, "received": {"companyTypeIds": ["ct-supplier"]}}
    assert newcomer in _listed(api, ns)
    assert api.get(f"/api/companies/{newcomer}", ns).status_code == 200
    assert api.get(f"/api/companies/{newcomer}/type/ct-supplier/questionnaires", ns).status_code == 200
    assert api.get(f"/api/companies/{newcomer}/company-types/ct-supplier/documents", ns).status_code == 200
    assert api.get("/api/company-type/ct-supplier/questionnaires", ns).status_code == 200
    # the rights change again; a list left out is kept
    api.admin("connections", {"namespace": ns, "company_id": newcomer, "received": []})
    detail = api.get(f"/api/companies/connections/{newcomer}", ns).json()
    assert detail["readingRights"]["given"]["companyTypeIds"] == ["ct-customer"]
    assert api.get(f"/api/companies/{newcomer}/type/ct-supplier/questionnaires", ns).status_code == 403

    assert api.admin("connections", {"namespace": ns}).status_code == 400
    assert api.admin("connections", {"namespace": ns, "company_id": "nobody"}).status_code == 404
    assert api.admin("connections", {"namespace": "nowhere", "company_id": newcomer}).status_code == 404
    assert api.admin("connections", {"namespace": ns, "company_id": newcomer, "received": ["ct-nope"]}
                     ).status_code == 400


def _fields(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for form in body["questionnaires"]["forms"] for f in form["fields"]]


def test_a_template_gains_and_loses_a_question_everywhere(api: Api) -> None:
    ns = _namespaces(api)[0]
    type_id = "ct-supplier"
    template = api.get(f"/api/company-type/{type_id}/questionnaires", ns).json()
    dropped = next(f["id"] for f in _fields(template) if f["type"] != "Label")
    company = ns  # the namespace's own questionnaire of the type, when it has one
    readable = [c for c in [company, *_listed(api, ns)]
                if api.get(f"/api/companies/{c}/type/{type_id}/questionnaires", ns).status_code == 200]
    assert readable
    answer = api.admin("templates", {"company_type_id": type_id,
                                     "add_field": {"id": "f-esg", "type": "Input", "label": "ESG report?"}})
    assert answer.status_code == 200, answer.text
    assert api.admin("templates", {"company_type_id": type_id, "remove_field": dropped}).status_code == 200
    template = api.get(f"/api/company-type/{type_id}/questionnaires", ns).json()
    ids = [f["id"] for f in _fields(template)]
    assert ids[-1] != dropped and "f-esg" in ids and dropped not in ids
    for company_id in readable:
        fields = {f["id"]: f for f in _fields(
            api.get(f"/api/companies/{company_id}/type/{type_id}/questionnaires", ns).json())}
        assert "f-esg" in fields and "information" not in fields["f-esg"]
        assert dropped not in fields
    assert api.admin("templates", {"company_type_id": type_id,
                                   "add_field": {"id": "f-esg", "type": "Input"}}).status_code == 400
    assert api.admin("templates", {"company_type_id": type_id, "remove_field": "f-none"}).status_code == 404
    assert api.admin("templates", {"company_type_id": "ct-nope", "remove_field": "x"}).status_code == 404
    assert api.admin("templates", {"company_type_id": type_id}).status_code == 400


def test_an_endpoint_starts_and_stops_sending_a_key(api: Api) -> None:
    ns = _namespaces(api)[0]
    answer = api.admin("keys", {"endpoint": "documents", "key": "sizeBytes", "value": 1234})
    assert answer.json() == {"documents": {"sizeBytes": 1234}}
    api.admin("keys", {"endpoint": "company", "key": "registeredAt", "value": "2019-04-01"})
    assert api.get(f"/api/companies/{ns}", ns).json()["registeredAt"] == "2019-04-01"
    documents = api.get(f"/api/companies/{ns}/company-types/ct-supplier/documents", ns).json()
    assert documents and all(doc["sizeBytes"] == 1234 for doc in documents)
    api.admin("keys", {"endpoint": "company", "key": "registeredAt", "remove": True})
    assert "registeredAt" not in api.get(f"/api/companies/{ns}", ns).json()
    assert api.admin("keys", {"endpoint": "company", "key": "name", "value": "x"}).status_code == 400
    assert api.admin("keys", {"endpoint": "nowhere", "key": "k", "value": 1}).status_code == 400


def test_a_document_is_added_and_served(api: Api) -> None:
    ns = _namespaces(api)[0]
    answer = api.admin("documents", {"add": {"company_id": ns, "company_type_id": "ct-supplier",
                                             "document": {"name": "soc2.pdf",
                                                          "expirationDate": "2031-01-01T00:00:00"}}})
    assert answer.status_code == 200, answer.text
    added = answer.json()
    listed = api.get(f"/api/companies/{ns}/company-types/ct-supplier/documents", ns).json()
    assert added in listed and added["name"] == "soc2.pdf"
    assert api.get(f"/api/documents/{added['id']}/url", ns).status_code == 200
    assert api.admin("documents", {"add": {"company_id": "nobody", "company_type_id": "ct-supplier"}}
                     ).status_code == 404
    assert api.admin("documents", {"add": {"company_id": ns}}).status_code == 400
    again = {"add": {"company_id": ns, "company_type_id": "ct-supplier", "document": {"id": added["id"]}}}
    assert api.admin("documents", again).status_code == 400
