"""Data generation (determinism, scales, realism), drift shapes, pagination and the CLI."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import httpx
import pytest

from sandbox import build_world
from sandbox.__main__ import add_arguments, faults_from_args, serve_kwargs

if TYPE_CHECKING:
    from conftest import Api


def test_same_seed_same_world() -> None:
    today = date(2026, 3, 1)
    a, b = build_world("small", 7, today=today), build_world("small", 7, today=today)
    assert a.truth() == b.truth()
    assert a.companies == b.companies
    ns = a.namespaces[0]
    for company_id, type_id in a.readable_pairs(ns):
        assert a.questionnaire(company_id, type_id) == b.questionnaire(company_id, type_id)
        assert a.documents(company_id, type_id) == b.documents(company_id, type_id)
    other = build_world("small", 8, today=today)
    assert set(other.companies).isdisjoint(a.companies)


def test_answers_belong_to_the_company_not_the_reader(api: Api, truth: dict[str, Any]) -> None:
    ns_a, ns_b = truth["namespaces"]
    shared = sorted({tuple(p) for p in truth["per_namespace"][ns_a]["questionnaires"]}
                    & {tuple(p) for p in truth["per_namespace"][ns_b]["questionnaires"]})
    assert shared
    for company_id, type_id in shared:
        path = f"/api/companies/{company_id}/type/{type_id}/questionnaires"
        assert api.get(path, ns=ns_a).content == api.get(path, ns=ns_b).content


def test_scales() -> None:
    medium = build_world("medium", 7)
    assert 400 <= sum(len(medium.namespace(n).connections) for n in medium.namespaces) <= 600
    large = build_world("large", 7)
    assert len(large.namespaces) == 3
    listed = [c.company_id for n in large.namespaces for c in large.namespace(n).connections]
    assert len(listed) >= 5000 and len(set(listed)) >= 5000
    assert sum(len(large.readable_pairs(n)) for n in large.namespaces) >= 10_000
    assert len(set(listed)) < len(listed), "namespaces share connections"


def test_connections_size_a_world_exactly_and_deterministically() -> None:
    today = date(2026, 3, 1)
    world = build_world("small", 7, today=today, connections=401)
    assert world.truth() == build_world("small", 7, today=today, connections=401).truth()
    assert [len(world.namespace(n).connections) for n in world.namespaces] == [201, 200]
    assert world.truth()["totals"]["connections"] == 401
    listed = [c.company_id for n in world.namespaces for c in world.namespace(n).connections]
    assert len(set(listed)) < len(listed), "namespaces still share connections"
    for n in world.namespaces:  # a ghost and a connection without rights, as at every scale
        connections = world.namespace(n).connections
        assert sum(c.ghost for c in connections) == 1
        assert sum(not c.received for c in connections) >= 2
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(ValueError, match="at least 4"):
        serve_kwargs(parser.parse_args(["--connections", "3"]))
    assert serve_kwargs(parser.parse_args(["--connections", "4"]))["connections"] == 4


def _lei_valid(lei: str) -> bool:
    digits = "".join(str(int(ch, 36)) for ch in lei)
    return len(lei) == 20 and int(digits) % 97 == 1


def test_companies_look_real() -> None:
    world = build_world("small", 7)
    for company in world.companies.values():
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}",
                            company["id"])
        assert _lei_valid(company["lei"])
        assert company["name"] and company["country"] and company["city"] and company["cin"]


def test_document_expiry_spread_around_today() -> None:
    today = date(2031, 6, 15)
    world = build_world("small", 7, today=today)
    days = []
    for company_id, type_id in world.readable_pairs(world.namespaces[0]):
        for doc in world.documents(company_id, type_id):
            days.append(datetime.strptime(doc["expirationDate"], "%Y-%m-%dT%H:%M:%S").date())
    expired = sum(d < today for d in days)
    soon = sum(today <= d <= today + timedelta(days=30) for d in days)
    assert expired > 0 and soon > 0 and len(days) - expired - soon > len(days) / 2


# ---------------------------------------------------------------- drift

def test_drift_shapes(make_api: Callable[..., Api]) -> None:
    api = make_api(drift=True, seed=5)
    truth = api.truth()
    ns = truth["namespaces"][0]
    company = api.get(f"/api/companies/{ns}", ns=ns).json()
    assert set(company) > {"id", "name", "country", "city", "lei", "cin"}
    fields: list[dict[str, Any]] = []
    forms: list[dict[str, Any]] = []
    docs: list[dict[str, Any]] = []
    for company_id, type_id in truth["per_namespace"][ns]["questionnaires"]:
        body = api.get(f"/api/companies/{company_id}/type/{type_id}/questionnaires", ns=ns).json()
        forms.extend(body["questionnaires"]["forms"])
        fields.extend(f for form in body["questionnaires"]["forms"] for f in form["fields"])
        docs.extend(api.get(f"/api/companies/{company_id}/company-types/{type_id}/documents",
                            ns=ns).json())
    assert any(set(form) > {"id", "label", "fields"} for form in forms)
    assert any(set(f) - {"id", "type", "label", "options", "information"} for f in fields)
    dates = [f["information"] for f in fields if f["type"] == "DatePicker" and "information" in f]
    assert dates and all(set(i) == {"value"} for i in dates)
    multi = [f["information"] for f in fields if f["type"] == "MultiSelect" and "information" in f]
    assert multi and all(isinstance(i["values"], list) for i in multi)
    assert any(f.get("options") == [] for f in fields)
    assert any("expirationDate" not in d for d in docs)
    assert any("expirationDate" in d and d["expirationDate"] is None for d in docs)
    assert any(set(d) - {"id", "name", "category", "type", "issueDate", "expirationDate"}
               for d in docs)


# ---------------------------------------------------------------- pagination

def _follow(api: Api, path: str, ns: str) -> tuple[list[Any], int]:
    items: list[Any] = []
    pages = 0
    url: str | None = path
    while url:
        response = api.get(url, ns=ns)
        assert response.status_code == 200
        items.extend(response.json())
        pages += 1
        url = response.links.get("next", {}).get("url")
        if url:
            assert url.startswith(api.server.base_url)
    return items, pages


def test_pagination_link_header(make_api: Callable[..., Api]) -> None:
    api = make_api(page_size=4)
    truth = api.truth()
    ns = truth["namespaces"][0]
    first = api.get("/api/companies/connections", ns=ns)
    assert len(first.json()) == 4
    assert first.headers["link"].endswith('?page=2>; rel="next"')
    items, pages = _follow(api, "/api/companies/connections", ns)
    assert [i["id"] for i in items] == truth["per_namespace"][ns]["connection_ids"]
    assert pages == 7
    total = 0
    for company_id, type_id in truth["per_namespace"][ns]["questionnaires"]:
        docs, _ = _follow(api, f"/api/companies/{company_id}/company-types/{type_id}/documents", ns)
        total += len(docs)
    assert total == truth["per_namespace"][ns]["documents"]["total"]
    beyond = api.get("/api/companies/connections?page=99", ns=ns)
    assert beyond.json() == [] and "link" not in beyond.headers


def test_no_link_header_by_default(api: Api, ns: str) -> None:
    response = api.get("/api/companies/connections", ns=ns)
    assert "link" not in response.headers and len(response.json()) == 25


# ---------------------------------------------------------------- CLI

def test_cli_flags_come_from_faults() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--latency-ms", "5", "--error-rate", "0.1", "--rate-limit", "50",
                              "--token-lifetime", "30", "--malformed-rate", "0.2",
                              "--reset-rate", "0.01", "--page-size", "10", "--url-ttl", "5",
                              "--auth-faults"])
    faults = faults_from_args(args)
    assert (faults.latency_ms, faults.error_rate, faults.rate_limit) == (5, 0.1, 50)
    assert (faults.token_lifetime, faults.malformed_rate, faults.reset_rate) == (30, 0.2, 0.01)
    assert faults.auth_faults and args.page_size == 10 and args.url_ttl_seconds == 5
    with pytest.raises(ValueError):
        faults_from_args(parser.parse_args(["--error-rate", "2"]))


def test_cli_subprocess_serves_and_hides_custom_password() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sandbox", "--port", "0", "--seed", "3",
         "--password", "hunter2-custom", "--latency-ms", "1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "hunter2-custom" not in line and "(custom password)" in line
        match = re.search(r"Sandbox ready at (http://127\.0\.0\.1:\d+) \(scale=small, seed=3\)",
                          line)
        assert match, line
        response = httpx.post(f"{match.group(1)}/api/auth",
                              auth=("analyst@example.com", "hunter2-custom"))
        assert response.status_code == 200
        assert httpx.get(f"{match.group(1)}/_sandbox/faults").json()["latency_ms"] == 1
    finally:
        proc.terminate()
        proc.wait(timeout=10)
