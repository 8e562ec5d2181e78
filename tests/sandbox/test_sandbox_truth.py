"""The ground truth agrees with what a full walk over the endpoints finds, and admin
mutations change both consistently."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from sandbox import Faults, build_world, create_app

if TYPE_CHECKING:
    from conftest import Api


def walk(api: Api) -> tuple[dict[str, dict[str, Any]], int]:
    """Sync every namespace the way a client would; return per-namespace counts and
    the number of requests made (user-info + endpoints 4-8 and 10)."""
    requests = 1
    roles = api.get("/api/auth/user-info").json()["roles"]
    found: dict[str, dict[str, Any]] = {}
    for role in roles:
        ns = role["companyId"]
        n = 0

        def get(path: str, ns: str = ns) -> httpx.Response:
            nonlocal n
            n += 1
            return api.get(path, ns=ns)

        assert get(f"/api/companies/{ns}").status_code == 200
        listed = [c["id"] for c in get("/api/companies/connections").json()]
        pairs = [(ns, t) for t in role["internal"]["companyTypeIds"]]
        detail_404, no_rights = [], []
        for company_id in listed:
            assert get(f"/api/companies/{company_id}").status_code == 200
            detail = get(f"/api/companies/connections/{company_id}")
            if detail.status_code == 404:
                detail_404.append(company_id)
                continue
            received = detail.json()["readingRights"]["received"]["companyTypeIds"]
            if not received:
                no_rights.append(company_id)
            pairs.extend((company_id, t) for t in received)
        field_types: Counter[str] = Counter()
        answerable = answered = multi = 0
        docs: Counter[str] = Counter(total=0, null_expiry=0, missing_expiry=0)
        for company_id, type_id in pairs:
            body = get(f"/api/companies/{company_id}/type/{type_id}/questionnaires").json()
            for form in body["questionnaires"]["forms"]:
                for field in form["fields"]:
                    field_types[field["type"]] += 1
                    answerable += field["type"] != "Label"
                    if "information" in field:
                        answered += 1
                        multi += (field["type"] == "Checkbox"
                                  and len(field["information"]["options"]) > 1)
            for doc in get(f"/api/companies/{company_id}/company-types/{type_id}/documents").json():
                docs["total"] += 1
                if "expirationDate" not in doc:
                    docs["missing_expiry"] += 1
                elif doc["expirationDate"] is None:
                    docs["null_expiry"] += 1
        template_types = sorted({t for _, t in pairs})
        for type_id in template_types:
            assert get(f"/api/company-type/{type_id}/questionnaires").status_code == 200
        requests += n
        found[ns] = {
            "connection_ids": listed, "connections": len(listed), "detail_404": detail_404,
            "no_received_rights": no_rights, "questionnaires": [list(p) for p in pairs],
            "questionnaire_count": len(pairs), "answerable_fields": answerable,
            "answered_fields": answered, "checkbox_multi": multi,
            "field_types": dict(sorted(field_types.items())),
            "template_type_ids": template_types, "expected_requests": n, "documents": docs,
        }
    return found, requests


def _assert_walk_matches_truth(api: Api) -> dict[str, Any]:
    truth = api.truth()
    api.admin("stats/reset", {})
    found, requests = walk(api)
    assert list(found) == truth["namespaces"]
    for ns, counts in found.items():
        expected = truth["per_namespace"][ns]
        for key, value in counts.items():
            if key == "template_type_ids":
                assert value == sorted(expected[key])
            elif key == "documents":
                for k, v in value.items():
                    assert expected["documents"][k] == v, (ns, k)
            else:
                assert expected[key] == value, (ns, key)
    assert requests == truth["expected_requests"]
    by_endpoint = api.admin("stats").json()["by_endpoint"]
    assert sum(sum(v.values()) for k, v in by_endpoint.items() if k != "1") == requests
    return truth


def test_truth_matches_a_full_walk(make_api: Callable[..., Api]) -> None:
    truth = _assert_walk_matches_truth(make_api(scale="small", seed=7))
    assert truth["totals"]["connections"] == 50
    shared = set.intersection(*(set(t["connection_ids"]) for t in truth["per_namespace"].values()))
    assert shared, "namespaces share some connections"


def test_truth_matches_a_full_walk_with_drift(make_api: Callable[..., Api]) -> None:
    truth = _assert_walk_matches_truth(make_api(scale="small", seed=3, drift=True))
    for t in truth["per_namespace"].values():
        assert t["documents"]["null_expiry"] >= 1 and t["documents"]["missing_expiry"] >= 1
        assert {"DatePicker", "MultiSelect"} <= set(t["field_types"])


def test_python_truth_equals_http_truth(api: Api) -> None:
    assert api.truth() == api.server.world.truth()


# ---------------------------------------------------------------- admin mutations

def _shared_pair(truth: dict[str, Any]) -> tuple[str, str]:
    a, b = (set(map(tuple, t["questionnaires"])) for t in truth["per_namespace"].values())
    return min(a & b)


def test_answer_change_is_seen_by_every_namespace(make_api: Callable[..., Api]) -> None:
    api = make_api()
    truth = api.truth()
    company_id, type_id = _shared_pair(truth)
    path = f"/api/companies/{company_id}/type/{type_id}/questionnaires"
    ns_a, ns_b = truth["namespaces"]
    forms = api.get(path, ns=ns_a).json()["questionnaires"]["forms"]
    field = next(f for form in forms for f in form["fields"] if f["type"] == "Input")
    before = api.truth()["per_namespace"]
    info = {"value": "Changed by the test"}
    response = api.admin("answers", {"company_id": company_id, "company_type_id": type_id,
                                     "field_id": field["id"], "information": info})
    assert response.status_code == 200
    for ns in (ns_a, ns_b):
        fields = [f for form in api.get(path, ns=ns).json()["questionnaires"]["forms"]
                  for f in form["fields"]]
        assert next(f for f in fields if f["id"] == field["id"])["information"] == info
        assert api.get(f"/api/companies/{company_id}/field/{field['id']}/information",
                       ns=ns).json() == {"information": info}
    after = api.truth()["per_namespace"]
    delta = 0 if "information" in field else 1
    for ns in (ns_a, ns_b):
        assert after[ns]["answered_fields"] == before[ns]["answered_fields"] + delta
    api.admin("answers", {"company_id": company_id, "company_type_id": type_id,
                          "field_id": field["id"], "information": None})
    assert api.get(f"/api/companies/{company_id}/field/{field['id']}/information",
                   ns=ns_b).status_code == 404
    assert api.truth()["per_namespace"][ns_a]["answered_fields"] \
        == before[ns_a]["answered_fields"] - (1 - delta)


def test_answer_admin_rejects_bad_input(make_api: Callable[..., Api]) -> None:
    api = make_api()
    company_id, type_id = _shared_pair(api.truth())
    assert api.admin("answers", {"company_id": company_id}).status_code == 400
    bad_field = {"company_id": company_id, "company_type_id": type_id, "field_id": "fld-x",
                 "information": {"value": "x"}}
    assert api.admin("answers", bad_field).status_code == 404
    assert api.client.post("/_sandbox/answers", content=b"{not json").status_code == 400


def test_document_changes(make_api: Callable[..., Api]) -> None:
    api = make_api()
    truth = api.truth()
    ns = truth["namespaces"][0]
    company_id, type_id = next(
        (c, t) for c, t in truth["per_namespace"][ns]["questionnaires"]
        if len(api.get(f"/api/companies/{c}/company-types/{t}/documents", ns=ns).json()) >= 2)
    path = f"/api/companies/{company_id}/company-types/{type_id}/documents"
    first, second = api.get(path, ns=ns).json()[:2]
    url = api.get(f"/api/documents/{first['id']}/url", ns=ns).json()["url"]
    content = httpx.get(url).content
    changed = api.admin("documents", {"document_id": first["id"],
                                      "set": {"expirationDate": "2001-01-01T00:00:00"}})
    assert changed.json()["expirationDate"] == "2001-01-01T00:00:00"
    assert api.get(path, ns=ns).json()[0]["expirationDate"] == "2001-01-01T00:00:00"
    assert httpx.get(url).content != content
    api.admin("documents", {"document_id": second["id"], "unset": ["expirationDate"]})
    assert "expirationDate" not in api.get(path, ns=ns).json()[1]
    assert api.truth()["per_namespace"][ns]["documents"]["missing_expiry"] == 1
    api.admin("documents", {"document_id": first["id"], "delete": True})
    assert first["id"] not in [d["id"] for d in api.get(path, ns=ns).json()]
    assert api.get(f"/api/documents/{first['id']}/url", ns=ns).status_code == 404
    assert api.admin("documents", {"document_id": "nope"}).status_code == 404


def test_settings_toggle_pagination_and_ttl(make_api: Callable[..., Api]) -> None:
    api = make_api()
    ns = api.truth()["namespaces"][0]
    assert api.admin("settings", {"page_size": 5}).json()["page_size"] == 5
    assert len(api.get("/api/companies/connections", ns=ns).json()) == 5
    assert api.admin("settings", {"page_size": 0}).status_code == 400
    api.admin("settings", {"page_size": None})
    assert len(api.get("/api/companies/connections", ns=ns).json()) == 25


def test_admin_is_loopback_only() -> None:
    app = create_app(build_world(), Faults(), email="a@b.c", password="pw")

    async def call(client_host: str) -> int:
        transport = httpx.ASGITransport(app=app, client=(client_host, 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as client:
            return (await client.get("/_sandbox/faults")).status_code

    assert asyncio.run(call("10.1.2.3")) == 403
    assert asyncio.run(call("127.0.0.1")) == 200


@pytest.mark.parametrize("route", ["nothing", "truth/extra"])
def test_unknown_admin_route(api: Api, route: str) -> None:
    assert api.client.get(f"/_sandbox/{route}").status_code == 404
