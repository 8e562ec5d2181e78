"""Contract tests: endpoints 1 and 2, token rules, namespace header rules."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jwt
import pytest

from sandbox import DEFAULT_EMAIL, DEFAULT_PASSWORD

if TYPE_CHECKING:
    from conftest import Api


def test_login_returns_hs256_jwt_valid_for_seven_days(api: Api) -> None:
    response = api.client.post("/api/auth", auth=(DEFAULT_EMAIL, DEFAULT_PASSWORD))
    assert response.status_code == 200
    token = response.json()["token"]
    assert jwt.get_unverified_header(token)["alg"] == "HS256"
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["sub"] == DEFAULT_EMAIL
    assert claims["exp"] - claims["iat"] == 7 * 24 * 3600
    other = jwt.decode(api.login(), options={"verify_signature": False})
    assert other["jti"] != claims["jti"]


@pytest.mark.parametrize("authorization", [
    None,
    "Basic " + base64.b64encode(f"{DEFAULT_EMAIL}:wrong".encode()).decode(),
    "Basic " + base64.b64encode(b"someone@example.com:sandbox-password").decode(),
    "Basic !!!not-base64!!!",
    "Bearer something",
])
def test_login_rejects_bad_credentials(api: Api, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    response = api.client.post("/api/auth", headers=headers)
    assert response.status_code == 401
    assert "message" in response.json()


def test_renewal_issues_new_token_and_invalidates_old(api: Api, ns: str) -> None:
    old = api.login()
    response = api.client.get("/api/auth/token", headers={"Authorization": f"Bearer {old}"})
    assert response.status_code == 200
    new = response.json()["token"]
    assert new != old
    assert api.get("/api/auth/user-info", token=new).status_code == 200
    assert api.get("/api/auth/user-info", token=old).status_code == 401
    assert api.get("/api/companies/connections", ns=ns, token=old).status_code == 401
    again = api.client.get("/api/auth/token", headers={"Authorization": f"Bearer {old}"})
    assert again.status_code == 401


@pytest.mark.parametrize("authorization", [
    None,
    "Bearer",
    "Bearer not.a.jwt",
    "Token abc",
    "Bearer " + jwt.encode({"sub": DEFAULT_EMAIL, "iat": 1, "exp": 4_000_000_000, "jti": "x"},
                           "another-secret-of-at-least-32-bytes!", algorithm="HS256"),
])
@pytest.mark.parametrize("path", ["/api/auth/token", "/api/auth/user-info",
                                  "/api/companies/connections"])
def test_missing_malformed_or_forged_tokens_get_401(api: Api, ns: str, path: str,
                                                    authorization: str | None) -> None:
    headers = {"x-namespace": f"/api/company/{ns}"}
    if authorization:
        headers["Authorization"] = authorization
    response = api.client.get(path, headers=headers)
    assert response.status_code == 401
    assert response.json()["message"]


def test_expired_token_gets_401(make_api: Callable[..., Api]) -> None:
    api = make_api()
    api.server.faults.token_lifetime = 2
    token = api.login()
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 2
    ns = api.get("/api/auth/user-info", token=token).json()["roles"][0]["companyId"]
    time.sleep(2.1)
    assert api.get("/api/companies/connections", ns=ns, token=token).status_code == 401
    assert api.client.get("/api/auth/token",
                          headers={"Authorization": f"Bearer {token}"}).status_code == 401
    api.server.faults.token_lifetime = None
    fresh = api.login()
    assert api.get("/api/companies/connections", ns=ns, token=fresh).status_code == 200


def test_renew_expired_option_allows_renewing_expired_token(make_api: Callable[..., Api]) -> None:
    api = make_api(renew_expired=True)
    api.server.faults.token_lifetime = 1
    token = api.login()
    time.sleep(1.1)
    assert api.get("/api/auth/user-info", token=token).status_code == 401
    api.server.faults.token_lifetime = None
    renewed = api.client.get("/api/auth/token", headers={"Authorization": f"Bearer {token}"})
    assert renewed.status_code == 200
    assert api.get("/api/auth/user-info", token=renewed.json()["token"]).status_code == 200


def test_invalidate_tokens_revokes_every_issued_token(make_api: Callable[..., Api]) -> None:
    api = make_api()
    first, second = api.login(), api.login()
    assert api.admin("invalidate-tokens", {}).json() == {"revoked": 2}
    for token in (first, second):
        assert api.get("/api/auth/user-info", token=token).status_code == 401
    assert api.get("/api/auth/user-info", token=api.login()).status_code == 200


def test_custom_credentials(make_api: Callable[..., Api]) -> None:
    api = make_api(email="me@corp.example", password="s3cret")
    assert api.client.post("/api/auth", auth=(DEFAULT_EMAIL, DEFAULT_PASSWORD)).status_code == 401
    token = api.login("me@corp.example", "s3cret")
    assert api.get("/api/auth/user-info", token=token).json()["email"] == "me@corp.example"


# ---------------------------------------------------------------- namespace header

def test_user_info_without_namespace(api: Api, truth: dict[str, Any]) -> None:
    response = api.client.get("/api/auth/user-info", headers=api.headers())
    assert response.status_code == 200
    body = response.json()
    assert body["email"] == DEFAULT_EMAIL
    assert [r["companyId"] for r in body["roles"]] == truth["namespaces"]
    for role in body["roles"]:
        assert set(role) == {"companyId", "internal", "external"}
        for side in ("internal", "external"):
            assert set(role[side]) == {"names", "companyTypeIds"}
            assert all(isinstance(x, str) for x in role[side]["names"])
            assert role[side]["companyTypeIds"]


def test_user_info_with_namespace_must_be_valid(api: Api, ns: str) -> None:
    assert api.get("/api/auth/user-info", ns=ns).status_code == 200
    bad = {**api.headers(), "x-namespace": "company/123"}
    assert api.client.get("/api/auth/user-info", headers=bad).status_code == 400
    assert api.get("/api/auth/user-info", ns="00000000-0000-4000-8000-000000000000"
                   ).status_code == 403


@pytest.mark.parametrize("path", [
    "/api/companies/connections",
    "/api/companies/x",
    "/api/companies/connections/x",
    "/api/companies/x/type/y/questionnaires",
    "/api/company-type/y/questionnaires",
    "/api/companies/x/field/f/information",
    "/api/companies/x/company-types/y/documents",
    "/api/documents/d/url",
])
def test_namespace_required_on_endpoints_4_to_11(api: Api, path: str) -> None:
    missing = api.client.get(path, headers=api.headers())
    assert missing.status_code == 400
    assert "x-namespace" in missing.json()["message"]
    for value in ("", "/api/company/", "/api/companies/abc", "abc", "/api/company/a/b"):
        response = api.client.get(path, headers={**api.headers(), "x-namespace": value})
        assert response.status_code == 400, value
    foreign = api.get(path, ns="00000000-0000-4000-8000-000000000000")
    assert foreign.status_code == 403


def test_revoked_namespace_leaves_roles_and_gets_403(make_api: Callable[..., Api]) -> None:
    api = make_api()
    namespaces = api.truth()["namespaces"]
    assert api.get("/api/companies/connections", ns=namespaces[1]).status_code == 200
    assert api.admin("revoke-namespace", {"company_id": namespaces[1]}).status_code == 200
    roles = api.get("/api/auth/user-info").json()["roles"]
    assert [r["companyId"] for r in roles] == namespaces[:1]
    assert api.get("/api/companies/connections", ns=namespaces[1]).status_code == 403
    assert api.truth()["namespaces"] == namespaces[:1]
