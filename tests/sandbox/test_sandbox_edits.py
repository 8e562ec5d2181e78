"""The admin routes that edit the sandbox's world between two syncs (the change feed's
tests use them): each edit shows exactly through the public endpoints and the truth,
bumps the world's generation, bad bodies answer 400 and unknown ids 404."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx
import pytest

from sandbox import edits, vocab
from sandbox.data import build_world
from sandbox.edits import EXTRA_KEY_ENDPOINTS

if TYPE_CHECKING:
    from conftest import Api

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
UNGRANTED = "ct-public-authority"  # no generated role or connection grants it


@pytest.fixture
def api(make_api: Callable[..., Api]) -> Api:
    """A sandbox of its own: these tests change the world."""
    client = make_api(scale="small", seed=7)
    client.token = client.login()
    return client


def _ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    return response.json()


def _generation(api: Api) -> int:
    return api.server.world.generation


def _per_ns(api: Api) -> dict[str, dict[str, Any]]:
    return dict(api.truth()["per_namespace"])


def _listed(api: Api, ns: str) -> list[str]:
    return [entry["id"] for entry in _ok(api.get("/api/companies/connections", ns))]


def _fields(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for form in body["questionnaires"]["forms"] for f in form["fields"]]


def _download(api: Api, ns: str, document_id: str) -> httpx.Response:
    url = _ok(api.get(f"/api/documents/{document_id}/url", ns))["url"]
    return httpx.get(url, timeout=10)


# ---------------------------------------------------------------- connections

def test_a_new_connection_is_served_like_a_generated_one(api: Api) -> None:
    before = _per_ns(api)
    ns, other = list(before)[:2]
    mine = set(before[ns]["connection_ids"])
    # a company `other` reads but `ns` is not connected to: `ns` will read the same data
    newcomer, shared_type = next(
        (c, t) for c, t in before[other]["questionnaires"] if c not in mine and c not in (ns, other))
    assert UNGRANTED not in before[ns]["template_type_ids"]
    assert api.get(f"/api/company-type/{UNGRANTED}/questionnaires", ns).status_code == 403
    assert api.get(f"/api/companies/{newcomer}", ns).status_code == 404
    generation = _generation(api)

    received = [shared_type, UNGRANTED]
    answer = _ok(api.admin("connections", {"namespace": ns, "company_id": newcomer, "received": received,
                                           "given": ["ct-customer"]}))
    assert _generation(api) > generation
    company = _ok(api.get(f"/api/companies/{newcomer}", other))
    detail = {"id": newcomer, "name": company["name"], "country": company["country"],
              "readingRights": {"given": {"companyTypeIds": ["ct-customer"]},
                                "received": {"companyTypeIds": received}}}
    assert answer == {"connection": detail}
    # endpoints 4, 5, 6
    assert _ok(api.get("/api/companies/connections", ns))[-1] == {"id": newcomer, "name": company["name"]}
    assert _ok(api.get(f"/api/companies/{newcomer}", ns)) == company
    assert _ok(api.get(f"/api/companies/connections/{newcomer}", ns)) == detail
    # endpoints 7, 9, 10, 11 read the company's own data, as through `other`
    path = f"/api/companies/{newcomer}/type/{shared_type}/questionnaires"
    questionnaire = _ok(api.get(path, ns))
    assert questionnaire == _ok(api.get(path, other))
    answered = next((f for f in _fields(questionnaire) if "information" in f), None)
    if answered is not None:
        assert _ok(api.get(f"/api/companies/{newcomer}/field/{answered['id']}/information", ns)) == {
            "information": answered["information"]}
    documents = _ok(api.get(f"/api/companies/{newcomer}/company-types/{shared_type}/documents", ns))
    assert documents == _ok(api.get(f"/api/companies/{newcomer}/company-types/{shared_type}/documents", other))
    for doc in documents:
        assert _download(api, ns, doc["id"]).status_code == 200
    _ok(api.get(f"/api/companies/{newcomer}/type/{UNGRANTED}/questionnaires", ns))
    new_docs = _ok(api.get(f"/api/companies/{newcomer}/company-types/{UNGRANTED}/documents", ns))
    not_received = next(t for t, _ in vocab.COMPANY_TYPES if t not in received)
    assert api.get(f"/api/companies/{newcomer}/type/{not_received}/questionnaires", ns).status_code == 403
    # endpoint 8: the type only this connection grants is readable now
    _ok(api.get(f"/api/company-type/{UNGRANTED}/questionnaires", ns))
    # the truth counts it like a generated connection
    after = _per_ns(api)[ns]
    assert after["connection_ids"] == [*before[ns]["connection_ids"], newcomer]
    assert after["questionnaires"] == [*before[ns]["questionnaires"], *([newcomer, t] for t in received)]
    assert after["documents"]["total"] == before[ns]["documents"]["total"] + len(documents) + len(new_docs)
    assert UNGRANTED in after["template_type_ids"]
    assert after["expected_requests"] == before[ns]["expected_requests"] + 2 + 2 * len(received) + 1
    assert _per_ns(api)[other] == before[other]


def test_a_connections_rights_are_replaced_and_it_ends(api: Api) -> None:
    before = _per_ns(api)
    ns = next(iter(before))
    company = next(c for c in before[ns]["connection_ids"] if c not in before[ns]["detail_404"]
                   and any(pair[0] == c for pair in before[ns]["questionnaires"]))
    old = _ok(api.get(f"/api/companies/connections/{company}", ns))["readingRights"]
    readable = old["received"]["companyTypeIds"][0]
    path = f"/api/companies/{company}/type/{readable}/questionnaires"
    _ok(api.get(path, ns))

    # a list left out is kept
    answer = _ok(api.admin("connections", {"namespace": ns, "company_id": company, "received": [UNGRANTED]}))
    rights = {"given": old["given"], "received": {"companyTypeIds": [UNGRANTED]}}
    assert answer["connection"]["readingRights"] == rights
    assert _ok(api.get(f"/api/companies/connections/{company}", ns))["readingRights"] == rights
    assert api.get(path, ns).status_code == 403
    _ok(api.get(f"/api/companies/{company}/type/{UNGRANTED}/questionnaires", ns))
    assert [company, UNGRANTED] in _per_ns(api)[ns]["questionnaires"]
    answer = _ok(api.admin("connections", {"namespace": ns, "company_id": company, "given": []}))
    assert answer["connection"]["readingRights"] == {"given": {"companyTypeIds": []},
                                                     "received": {"companyTypeIds": [UNGRANTED]}}
    assert _listed(api, ns) == before[ns]["connection_ids"]  # still listed once, in place

    generation = _generation(api)
    assert _ok(api.admin("connections", {"namespace": ns, "company_id": company, "remove": True})) == {
        "removed": company}
    assert _generation(api) > generation
    assert company not in _listed(api, ns)
    for gone in (f"/api/companies/{company}", f"/api/companies/connections/{company}",
                 f"/api/companies/{company}/type/{UNGRANTED}/questionnaires"):
        assert api.get(gone, ns).status_code == 404
    after = _per_ns(api)[ns]
    assert after["connection_ids"] == [c for c in before[ns]["connection_ids"] if c != company]
    assert all(pair[0] != company for pair in after["questionnaires"])


def test_connections_bad_bodies_and_unknown_ids(api: Api) -> None:
    ns, other = api.truth()["namespaces"][:2]
    company = _listed(api, ns)[0]
    stranger = next(c for c in _listed(api, other) if c not in _listed(api, ns))
    for body in ({"namespace": ns}, {"company_id": company}, {"namespace": ns, "company_id": company,
                                                              "received": "ct-supplier"},
                 {"namespace": ns, "company_id": company, "received": ["ct-nope"]},
                 {"namespace": ns, "company_id": company, "given": [1]}, {"namespace": [ns], "company_id": company},
                 {"namespace": ns, "company_id": {"id": company}}):
        assert api.admin("connections", body).status_code == 400, body
    assert api.client.post("/_sandbox/connections", json=[ns]).status_code == 400
    for body in ({"namespace": ns, "company_id": "nobody"}, {"namespace": ns, "company_id": ns},
                 {"namespace": "nowhere", "company_id": company},
                 {"namespace": ns, "company_id": stranger, "remove": True}):
        assert api.admin("connections", body).status_code == 404, body
    assert stranger not in _listed(api, ns)


# ---------------------------------------------------------------- templates

def _readers_of(per_ns: dict[str, dict[str, Any]], type_id: str) -> dict[str, list[str]]:
    """namespace -> companies whose questionnaire of `type_id` it reads."""
    return {ns: [c for c, t in truth["questionnaires"] if t == type_id] for ns, truth in per_ns.items()}


def test_a_template_gains_a_question_everywhere(api: Api) -> None:
    before = _per_ns(api)
    readers = {t: _readers_of(before, t) for t in ("ct-supplier", "ct-customer", "ct-distributor")}
    type_id = max(readers, key=lambda t: sum(map(len, readers[t].values())))
    readers_of_type = readers[type_id]
    ns = next(n for n, companies in readers_of_type.items() if companies)
    template = _ok(api.get(f"/api/company-type/{type_id}/questionnaires", ns))
    forms = template["questionnaires"]["forms"]
    assert len(forms) >= 2
    questionnaires = {(n, c): _ok(api.get(f"/api/companies/{c}/type/{type_id}/questionnaires", n))
                      for n, companies in readers_of_type.items() for c in companies}
    generation = _generation(api)

    field = {"id": "f-esg", "type": "Input", "label": "Do you publish an ESG report?"}
    answer = _ok(api.admin("templates", {"company_type_id": type_id, "add_field": field,
                                         "form_id": forms[1]["id"]}))
    assert _generation(api) > generation
    forms[1]["fields"].append(field)
    assert answer == template
    assert _ok(api.get(f"/api/company-type/{type_id}/questionnaires", ns)) == template
    for (n, company), body in questionnaires.items():
        body["questionnaires"]["forms"][1]["fields"].append(field)  # unanswered: no information
        assert _ok(api.get(f"/api/companies/{company}/type/{type_id}/questionnaires", n)) == body
        assert api.get(f"/api/companies/{company}/field/f-esg/information", n).status_code == 404
    after = _per_ns(api)
    for n, companies in readers_of_type.items():
        assert after[n]["fields"] == before[n]["fields"] + len(companies)
        assert after[n]["answerable_fields"] == before[n]["answerable_fields"] + len(companies)
        assert after[n]["answered_fields"] == before[n]["answered_fields"]

    # the new question can be answered like any other
    (n, company) = next(iter(questionnaires))
    _ok(api.admin("answers", {"company_id": company, "company_type_id": type_id, "field_id": "f-esg",
                              "information": {"value": "Yes, yearly"}}))
    assert _ok(api.get(f"/api/companies/{company}/field/f-esg/information", n)) == {
        "information": {"value": "Yes, yearly"}}
    assert _per_ns(api)[n]["answered_fields"] == after[n]["answered_fields"] + readers_of_type[n].count(company)

    # a choice question goes to the first form by default, with its options
    choice = {"id": "f-iso", "type": "Dropdown", "label": "ISO 14001?",
              "options": [{"id": "o-yes", "value": "Yes"}, {"id": "o-no", "value": "No"}]}
    answer = _ok(api.admin("templates", {"company_type_id": type_id, "add_field": choice}))
    assert answer["questionnaires"]["forms"][0]["fields"][-1] == choice


def test_a_template_loses_a_question_and_its_answers_everywhere(api: Api) -> None:
    before = _per_ns(api)
    type_id = "ct-supplier"
    readers = _readers_of(before, type_id)
    pairs = [(n, c) for n, companies in readers.items() for c in companies]
    assert pairs
    bodies = {p: _ok(api.get(f"/api/companies/{p[1]}/type/{type_id}/questionnaires", p[0])) for p in pairs}
    answered_in = {p: {f["id"] for f in _fields(body) if "information" in f} for p, body in bodies.items()}
    dropped = max({f for ids in answered_in.values() for f in ids},
                  key=lambda f: sum(f in ids for ids in answered_in.values()))
    ns = pairs[0][0]

    answer = _ok(api.admin("templates", {"company_type_id": type_id, "remove_field": dropped}))
    assert dropped not in [f["id"] for f in _fields(answer)]
    assert _ok(api.get(f"/api/company-type/{type_id}/questionnaires", ns)) == answer
    for (n, company), body in bodies.items():
        for form in body["questionnaires"]["forms"]:
            form["fields"] = [f for f in form["fields"] if f["id"] != dropped]
        assert _ok(api.get(f"/api/companies/{company}/type/{type_id}/questionnaires", n)) == body
        assert api.get(f"/api/companies/{company}/field/{dropped}/information", n).status_code == 404
    after = _per_ns(api)
    for n, companies in readers.items():
        lost = sum(dropped in answered_in[(n, c)] for c in companies)
        assert after[n]["fields"] == before[n]["fields"] - len(companies)
        assert after[n]["answered_fields"] == before[n]["answered_fields"] - lost

    # a field of that id added again is a new question: the old answers do not come back
    _ok(api.admin("templates", {"company_type_id": type_id,
                                "add_field": {"id": dropped, "type": "Input", "label": "Again"}}))
    for (n, company) in pairs:
        fields = {f["id"]: f for f in _fields(
            _ok(api.get(f"/api/companies/{company}/type/{type_id}/questionnaires", n)))}
        assert "information" not in fields[dropped]
    assert all(_per_ns(api)[n]["answered_fields"] == after[n]["answered_fields"] for n in readers)


def test_templates_bad_bodies_and_unknown_ids(api: Api) -> None:
    ns = api.truth()["namespaces"][0]
    supplier = _fields(_ok(api.get("/api/company-type/ct-supplier/questionnaires", ns)))[1]["id"]
    customer_field = next(iter(api.server.world.templates["ct-customer"].fields)).id
    for body in ({"company_type_id": "ct-supplier"},
                 {"add_field": {"id": "f-x", "type": "Input"}},
                 {"company_type_id": "ct-supplier", "add_field": {"id": "f-x", "type": "Input"},
                  "remove_field": supplier},
                 {"company_type_id": "ct-supplier", "add_field": "f-x"},
                 {"company_type_id": "ct-supplier", "add_field": {"id": "f-x"}},
                 {"company_type_id": "ct-supplier", "add_field": {"id": "f-x", "type": "Input", "label": 3}},
                 {"company_type_id": "ct-supplier", "add_field": {"id": "f-x", "type": "Dropdown",
                                                                  "options": ["Yes"]}},
                 {"company_type_id": "ct-supplier", "add_field": {"id": supplier, "type": "Input"}},
                 {"company_type_id": "ct-supplier", "add_field": {"id": customer_field, "type": "Input"}}):
        assert api.admin("templates", body).status_code == 400, body
    for body in ({"company_type_id": "ct-nope", "add_field": {"id": "f-x", "type": "Input"}},
                 {"company_type_id": "ct-nope", "remove_field": supplier},
                 {"company_type_id": "ct-supplier", "add_field": {"id": "f-x", "type": "Input"},
                  "form_id": "frm-nope"},
                 {"company_type_id": "ct-supplier", "remove_field": "f-none"},
                 {"company_type_id": "ct-supplier", "remove_field": customer_field}):
        assert api.admin("templates", body).status_code == 404, body
    assert api.server.world.field_type_id("f-x") is None


# ---------------------------------------------------------------- keys

def _objects(api: Api, endpoint: str) -> list[dict[str, Any]]:
    """Objects of `endpoint` as served to every namespace (a few of each kind)."""
    out: list[dict[str, Any]] = []
    for ns, truth in _per_ns(api).items():
        listed = _ok(api.get("/api/companies/connections", ns))
        details = [c for c in truth["connection_ids"] if c not in truth["detail_404"]][:4]
        pairs = truth["questionnaires"][:4]
        if endpoint == "company":
            out += [_ok(api.get(f"/api/companies/{c}", ns)) for c in [ns, *truth["connection_ids"][:3]]]
        elif endpoint == "connections":
            out += listed
        elif endpoint == "connection":
            out += [_ok(api.get(f"/api/companies/connections/{c}", ns)) for c in details]
        elif endpoint == "questionnaire":
            out += [_ok(api.get(f"/api/companies/{c}/type/{t}/questionnaires", ns)) for c, t in pairs]
        elif endpoint == "template":
            out += [_ok(api.get(f"/api/company-type/{t}/questionnaires", ns)) for t in truth["template_type_ids"]]
        else:
            out += [doc for c, t in truth["questionnaires"]
                    for doc in _ok(api.get(f"/api/companies/{c}/company-types/{t}/documents", ns))]
    assert out
    return out


@pytest.mark.parametrize("endpoint", list(EXTRA_KEY_ENDPOINTS))
def test_an_endpoint_starts_and_stops_sending_a_key(api: Api, endpoint: str) -> None:
    others = [e for e in EXTRA_KEY_ENDPOINTS if e != endpoint]
    original = _objects(api, endpoint)
    generation = _generation(api)
    value = {"since": "2019-04-01", "tags": [1, 2]}
    assert _ok(api.admin("keys", {"endpoint": endpoint, "key": "registeredAt", "value": value})) == {
        endpoint: {"registeredAt": value}}
    assert _generation(api) > generation
    assert _ok(api.admin("keys")) == {endpoint: {"registeredAt": value}}
    assert _objects(api, endpoint) == [{**body, "registeredAt": value} for body in original]
    assert all("registeredAt" not in body for e in others for body in _objects(api, e))
    if endpoint in ("connections", "documents"):  # paged lists carry it too
        _ok(api.admin("settings", {"page_size": 2}))
        assert all(body["registeredAt"] == value for body in _objects(api, endpoint))
        _ok(api.admin("settings", {"page_size": None}))

    assert _ok(api.admin("keys", {"endpoint": endpoint, "key": "registeredAt", "remove": True})) == {}
    assert _objects(api, endpoint) == original
    assert _ok(api.admin("keys")) == {}


def test_keys_bad_bodies(api: Api) -> None:
    for body in ({"endpoint": "company", "value": 1}, {"key": "k", "value": 1},
                 {"endpoint": "company", "key": "k"}, {"endpoint": "nowhere", "key": "k", "value": 1},
                 {"endpoint": "company", "key": "", "value": 1}, {"endpoint": "company", "key": 7, "value": 1}):
        assert api.admin("keys", body).status_code == 400, body
    assert _ok(api.admin("keys")) == {}


def test_a_key_an_object_carries_already_keeps_its_own_value(make_api: Callable[..., Api]) -> None:
    api = make_api(scale="small", seed=7, drift=True)
    ns = api.truth()["namespaces"][0]
    path = f"/api/companies/{ns}/company-types/{api.truth()['per_namespace'][ns]['internal_type_ids'][0]}/documents"
    first, *rest = _ok(api.get(path, ns))
    _ok(api.admin("documents", {"document_id": first["id"], "set": {"note": "own"}}))
    _ok(api.admin("keys", {"endpoint": "documents", "key": "note", "value": "sent"}))
    assert [doc["note"] for doc in _ok(api.get(path, ns))] == ["own"] + ["sent"] * len(rest)
    sizes = [doc["sizeBytes"] for doc in _ok(api.get(path, ns))]  # a drift key, sent natively
    _ok(api.admin("keys", {"endpoint": "documents", "key": "sizeBytes", "value": 1}))
    assert [doc["sizeBytes"] for doc in _ok(api.get(path, ns))] == sizes


# ---------------------------------------------------------------- documents

def test_a_document_is_added_listed_and_downloadable(api: Api) -> None:
    before = _per_ns(api)
    ns = next(iter(before))
    company, type_id = next(p for p in before[ns]["questionnaires"] if p[0] != ns)
    path = f"/api/companies/{company}/company-types/{type_id}/documents"
    readers = [n for n, truth in before.items() if [company, type_id] in truth["questionnaires"]]
    listed = _ok(api.get(path, ns))
    generation = _generation(api)

    given = {"name": "SOC2_report_2026.pdf", "category": "Compliance", "expirationDate": "2031-01-01T00:00:00"}
    added = _ok(api.admin("documents", {"add": {"company_id": company, "company_type_id": type_id,
                                                "document": given}}))
    assert _generation(api) > generation
    assert UUID.match(added["id"]) and added == {**added, **given}
    assert set(added) == {"id", "name", "category", "type", "issueDate", "expirationDate"}
    assert TIMESTAMP.match(added["issueDate"]) and isinstance(added["type"], str) and added["type"]
    bare = _ok(api.admin("documents", {"add": {"company_id": company, "company_type_id": type_id}}))
    assert set(bare) == set(added) and bare["id"] != added["id"]
    assert TIMESTAMP.match(bare["expirationDate"]) and TIMESTAMP.match(bare["issueDate"])
    assert (bare["category"], bare["type"]) in {(kind[0], kind[1]) for kind in vocab.DOCUMENT_KINDS}
    for n in readers:
        assert _ok(api.get(path, n)) == [*listed, added, bare]
    for doc in (added, bare):
        file = _download(api, ns, doc["id"])
        assert file.status_code == 200 and file.content.startswith(b"%PDF")
        assert file.headers["content-disposition"] == f"attachment; filename*=UTF-8''{quote(doc['name'], safe='')}"
    after = _per_ns(api)
    for n in before:
        assert after[n]["documents"]["total"] == before[n]["documents"]["total"] + 2 * (n in readers)

    # the route's other forms work on it
    changed = _ok(api.admin("documents", {"document_id": added["id"], "set": {"expirationDate": None}}))
    assert changed["expirationDate"] is None and _ok(api.get(path, ns))[-2] == changed
    assert _ok(api.admin("documents", {"document_id": added["id"], "delete": True})) == {"deleted": added["id"]}
    assert _ok(api.get(path, ns)) == [*listed, bare]
    assert api.get(f"/api/documents/{added['id']}/url", ns).status_code == 404


def test_documents_bad_bodies_and_unknown_ids(api: Api) -> None:
    ns = api.truth()["namespaces"][0]
    existing = _ok(api.get(f"/api/companies/{ns}/company-types/"
                           f"{api.truth()['per_namespace'][ns]['internal_type_ids'][0]}/documents", ns))[0]["id"]
    for add in ({"company_id": ns}, {"company_type_id": "ct-supplier"}, "x",
                {"company_id": ns, "company_type_id": "ct-supplier", "document": ["x"]},
                {"company_id": ns, "company_type_id": "ct-supplier", "document": {"id": existing}},
                {"company_id": ns, "company_type_id": "ct-supplier", "document": {"id": "a/b"}},
                {"company_id": ns, "company_type_id": "ct-supplier", "document": {"name": 5}}):
        assert api.admin("documents", {"add": add}).status_code == 400, add
    for add in ({"company_id": "nobody", "company_type_id": "ct-supplier"},
                {"company_id": ns, "company_type_id": "ct-nope"}):
        assert api.admin("documents", {"add": add}).status_code == 404, add
    assert api.admin("documents", {"document_id": "nope"}).status_code == 404


def test_a_drift_document_gets_the_size_of_its_file(make_api: Callable[..., Api]) -> None:
    api = make_api(scale="small", seed=7, drift=True)
    ns = api.truth()["namespaces"][0]
    added = _ok(api.admin("documents", {"add": {"company_id": ns, "company_type_id": "ct-supplier"}}))
    pdf = added["name"].endswith(".pdf")
    assert added["mimeType"] == ("application/pdf" if pdf else "application/octet-stream")
    file = _download(api, ns, added["id"])
    assert file.status_code == 200 and added["sizeBytes"] == len(file.content)
    named = _ok(api.admin("documents", {"add": {"company_id": ns, "company_type_id": "ct-supplier",
                                                "document": {"name": "minutes.docx", "sizeBytes": 10}}}))
    assert named["mimeType"] == "application/octet-stream" and named["sizeBytes"] == 10


# ---------------------------------------------------------------- the world itself

def test_concurrent_edits_each_bump_the_generation_once() -> None:
    world = build_world("small", 7)
    ns, other = world.namespaces[:2]
    company, type_id = world.readable_pairs(ns)[-1]
    start, docs = world.generation, len(world.documents(company, type_id))
    ids: list[str] = []

    def edit(worker: int) -> None:
        for i in range(25):
            ids.append(edits.add_document(world, company, type_id, {})["id"])
            edits.send_key(world, "documents", f"k{worker}-{i}", i)

    threads = [threading.Thread(target=edit, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(ids)) == 100 and len(world.documents(company, type_id)) == docs + 100
    assert world.generation == start + 200
    mine, theirs = world.namespace(ns), world.namespace(other)
    assert mine is not None and theirs is not None
    stranger = next(c for c in theirs.by_id if c not in mine.by_id)
    edits.connect(world, ns, stranger, received=["ct-supplier", "ct-supplier"])
    detail = world.connection_detail(ns, stranger)
    assert detail is not None and detail["readingRights"]["received"] == {"companyTypeIds": ["ct-supplier"]}
    edits.add_template_field(world, "ct-supplier", {"id": "f-new", "type": "Input", "label": "New"})
    edits.remove_template_field(world, "ct-supplier", "f-new")
    edits.remove_connection(world, ns, stranger)
    assert world.generation == start + 204
    # the truth follows: the same world as built, plus the documents added
    fresh, edited = build_world("small", 7, today=world.today).truth(), world.truth()
    for n, truth in edited["per_namespace"].items():
        expected = fresh["per_namespace"][n]
        added = 100 if [company, type_id] in truth["questionnaires"] else 0
        assert truth == {**expected, "documents": {**expected["documents"],
                                                   "total": expected["documents"]["total"] + added}}
