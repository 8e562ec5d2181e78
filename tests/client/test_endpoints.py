"""Every endpoint: method, path (quoted ids), headers and parsing."""

from __future__ import annotations

import httpx
import orjson
import pytest

from pipelines.company_connections.models import (
    Company,
    ConnectionDetail,
    ConnectionEntry,
    Document,
    DocumentUrl,
    Questionnaire,
    UserInfo,
)

from .fakes import BASE_URL, FakeService

pytestmark = pytest.mark.anyio

NS = "ns-0001"


def _assert_standard(request: httpx.Request, service: FakeService, *, namespace: str | None) -> None:
    assert request.method == "GET"
    assert request.headers["Authorization"].removeprefix("Bearer ") in service.valid
    if namespace is None:
        assert "x-namespace" not in request.headers
    else:
        assert request.headers["x-namespace"] == f"/api/company/{namespace}"


async def test_user_info_sends_no_namespace_and_parses_roles() -> None:
    service = FakeService()
    service.route("GET", "/api/auth/user-info", json={
        "roles": [
            {"companyId": "c-1", "internal": {"names": ["EDITOR"], "companyTypeIds": ["t1"]},
             "external": {"names": ["SHARER"], "companyTypeIds": None}},
            {"companyId": "c-2", "internal": None},
            {"companyId": "c-1", "internal": {"names": ["ADMIN"]}},
        ],
        "email": "analyst@example.com",
    })
    async with service.client() as client:
        info = await client.user_info()
    assert isinstance(info, UserInfo)
    assert info.company_ids == ["c-1", "c-2"]
    assert info.roles[0].internal.company_type_ids == ["t1"]
    assert info.roles[0].external.company_type_ids == []
    assert info.roles[1].internal.names == []
    assert info.model_extra == {"email": "analyst@example.com"}
    (request,) = service.calls("/api/auth/user-info")
    _assert_standard(request, service, namespace=None)


async def test_company_quotes_the_id_and_keeps_unknown_keys() -> None:
    service = FakeService()
    service.route("GET", "/api/companies/a%2Fb%20c", json={
        "id": "a/b c", "name": "Acme", "country": "SE", "city": None, "lei": "5493",
        "cin": 12345, "website": "acme.example",
    })
    async with service.client() as client:
        company = await client.company(NS, "a/b c")
    assert isinstance(company, Company)
    assert (company.id, company.name, company.city, company.cin) == ("a/b c", "Acme", None, "12345")
    assert company.model_extra == {"website": "acme.example"}
    (request,) = service.calls("/api/companies/a%2Fb%20c")
    _assert_standard(request, service, namespace=NS)


async def test_connections_list_and_detail() -> None:
    service = FakeService()
    service.route("GET", "/api/companies/connections",
                  json=[{"id": "c-2", "name": "Beta"}, {"id": "c-3", "name": None}])
    service.route("GET", "/api/companies/connections/c-2", json={
        "id": "c-2", "name": "Beta", "country": "NO",
        "readingRights": {"given": {"companyTypeIds": ["t1", "t2"]}, "received": None},
    })
    service.route("GET", "/api/companies/connections/c-3", json={"id": "c-3"})
    async with service.client() as client:
        entries = await client.connections(NS)
        detail = await client.connection(NS, "c-2")
        bare = await client.connection(NS, "c-3")
    assert entries == [ConnectionEntry(id="c-2", name="Beta"), ConnectionEntry(id="c-3")]
    assert isinstance(detail, ConnectionDetail)
    assert detail.reading_rights.given.company_type_ids == ["t1", "t2"]
    assert detail.reading_rights.received.company_type_ids == []
    assert bare.reading_rights.given.company_type_ids == []
    for path in ("/api/companies/connections", "/api/companies/connections/c-2"):
        (request,) = service.calls(path)
        _assert_standard(request, service, namespace=NS)


QUESTIONNAIRE = {
    "questionnaires": {
        "forms": [
            {"id": "f1", "label": "General", "fields": [
                {"id": "l1", "type": "Label", "label": "About you"},
                {"id": "i1", "type": "Input", "label": "Name?", "information": {"value": "Acme"}},
                {"id": "d1", "type": "Dropdown", "label": "Size", "options": [
                    {"id": "o1", "value": "Small"}, {"id": "o2", "value": "Large"}],
                 "information": {"options": [{"id": "o2", "value": "Large"}]}},
            ]},
        ]
    }
}


async def test_questionnaire_and_template_paths() -> None:
    service = FakeService()
    service.route("GET", "/api/companies/c%3A2/type/t%2F1/questionnaires", json=QUESTIONNAIRE)
    service.route("GET", "/api/company-type/t%2F1/questionnaires", json=QUESTIONNAIRE)
    async with service.client() as client:
        answered = await client.questionnaire(NS, "c:2", "t/1")
        template = await client.template(NS, "t/1")
    assert isinstance(answered, Questionnaire)
    assert [f.id for f in answered.forms[0].fields] == ["l1", "i1", "d1"]
    assert answered.forms[0].fields[1].information == {"value": "Acme"}
    assert answered.forms[0].fields[2].options[1].value == "Large"
    assert answered.raw_forms == QUESTIONNAIRE["questionnaires"]["forms"]
    assert template.forms[0].label == "General"
    _assert_standard(service.calls("/api/companies/c%3A2/type/t%2F1/questionnaires")[0],
                     service, namespace=NS)
    _assert_standard(service.calls("/api/company-type/t%2F1/questionnaires")[0],
                     service, namespace=NS)


async def test_documents_and_url() -> None:
    service = FakeService()
    documents = [
        {"id": "d1", "name": "cert.pdf", "category": "Certificates", "type": "ISO 9001",
         "issueDate": "2024-01-01T00:00:00", "expirationDate": "2026-01-01T00:00:00",
         "sizeBytes": 1024},
        {"id": "d2", "name": "policy.docx", "category": "Policies", "type": "Code of conduct",
         "issueDate": None},
    ]
    service.route("GET", "/api/companies/c-2/company-types/t1/documents", json=documents)
    service.route("GET", "/api/documents/d%201/url", json={"url": "https://files.test/d1?sig=abc"})
    async with service.client() as client:
        docs = await client.documents(NS, "c-2", "t1")
        url = await client.document_url(NS, "d 1")
    assert all(isinstance(d, Document) for d in docs)
    assert docs[0].expiration_date == "2026-01-01T00:00:00"
    assert docs[0].raw == documents[0]
    assert docs[1].expiration_date is None and docs[1].raw == documents[1]
    assert isinstance(url, DocumentUrl) and url.url == "https://files.test/d1?sig=abc"
    assert "sig=abc" not in repr(url)
    for path in ("/api/companies/c-2/company-types/t1/documents", "/api/documents/d%201/url"):
        _assert_standard(service.calls(path)[0], service, namespace=NS)


@pytest.mark.parametrize("body", [
    lambda t: httpx.Response(200, json={"token": t}),
    lambda t: httpx.Response(200, json={"accessToken": t}),
    lambda t: httpx.Response(200, json={"access_token": t}),
    lambda t: httpx.Response(200, json={"jwt": t, "user": {"id": 1}}),
    lambda t: httpx.Response(200, content=orjson.dumps(t)),
    lambda t: httpx.Response(200, text=t + "\n", headers={"content-type": "text/plain"}),
], ids=["token", "accessToken", "access_token", "jwt", "json-string", "plain-text"])
async def test_login_response_variants(body) -> None:
    service = FakeService()
    service.login_body = body
    service.route("GET", "/api/auth/user-info", json={"roles": []})
    async with service.client() as client:
        await client.user_info()
        assert client.tokens.current in service.valid
    (login,) = service.calls("/api/auth")
    assert login.method == "POST"
    assert login.headers["Authorization"].startswith("Basic ")
    assert "x-namespace" not in login.headers


async def test_base_url_with_a_path_prefix() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url}")
        if request.url.path.endswith("/api/auth"):
            return httpx.Response(200, json={"token": "opaque-token"})
        return httpx.Response(200, json={"roles": []})

    service = FakeService()
    async with service.client(base_url=BASE_URL + "/prefix/",
                              transport=httpx.MockTransport(handler)) as client:
        await client.user_info()
    assert seen == [f"POST {BASE_URL}/prefix/api/auth", f"GET {BASE_URL}/prefix/api/auth/user-info"]


async def test_gc_is_tuned_while_clients_are_open_and_restored_after() -> None:
    import gc

    before = gc.get_threshold()
    service = FakeService()
    service.route("GET", "/api/companies/c-1", json={"id": "c-1"})
    async with service.client() as first:
        assert gc.get_threshold()[0] >= 20_000 and gc.get_freeze_count() > 0
        async with service.client() as second:
            await second.company("ns", "c-1")
        assert gc.get_threshold()[0] >= 20_000  # still tuned: `first` is open
        await first.company("ns", "c-1")
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
