"""Contract tests: every fault switch is observable, and where faults do not apply."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import httpx
import jwt
import orjson
import pytest

from sandbox import Faults

if TYPE_CHECKING:
    from conftest import Api


@pytest.fixture(scope="module")
def faulty(make_module_api: Callable[..., Api]) -> Api:
    """A sandbox of its own, so fault switches never leak into other tests."""
    api = make_module_api(scale="small", seed=11)
    api.token = api.login()
    return api


@pytest.fixture
def fapi(faulty: Api) -> Iterator[Api]:
    """The fault server's Api, with every switch off again after the test."""
    faulty.server.faults.reset()
    yield faulty
    faulty.server.faults.reset()


@pytest.fixture(scope="module")
def fns(faulty: Api) -> str:
    return str(faulty.truth()["namespaces"][0])


def _statuses(api: Api, ns: str, n: int) -> Counter[int]:
    return Counter(api.get("/api/companies/connections", ns=ns).status_code for _ in range(n))


#: Switches that only parameterise another one (off while that one is off).
_PARAMETERS = {"quota_window", "shed_retry_after"}


def test_faults_default_off() -> None:
    faults = Faults()
    assert all(not value for name, value in faults.to_dict().items() if name not in _PARAMETERS)


def test_shedding_answers_a_fixed_share_whatever_the_pace(fapi: Api, fns: str) -> None:
    fapi.server.faults.update({"shed_every": 11, "error_every": 7, "shed_retry_after": 2})
    responses = [fapi.get("/api/companies/connections", ns=fns) for _ in range(77)]
    codes = [r.status_code for r in responses]
    shed = [i + 1 for i, code in enumerate(codes) if code == 429]
    assert shed == list(range(11, 78, 11))
    assert [i + 1 for i, code in enumerate(codes) if code == 503] == [7, 14, 21, 28, 35, 42, 49,
                                                                      56, 63, 70]
    assert {responses[i - 1].headers["retry-after"] for i in shed} == {"2"}
    assert fapi.admin("stats").json()["injected"]["shed"] == 7


def test_shed_percent_is_a_random_share(fapi: Api, fns: str) -> None:
    fapi.server.faults.shed_percent = 20
    share = _statuses(fapi, fns, 300)[429] / 300
    assert 0.12 < share < 0.28


def test_quota_refuses_beyond_n_per_window_until_it_ends(fapi: Api, fns: str) -> None:
    fapi.server.faults.update({"quota": 5, "quota_window": 1.5})
    first = [fapi.get("/api/companies/connections", ns=fns) for _ in range(8)]
    assert [r.status_code for r in first] == [200] * 5 + [429] * 3
    assert first[-1].headers["retry-after"] in {"1", "2"}
    time.sleep(1.6)
    assert fapi.get("/api/companies/connections", ns=fns).status_code == 200
    with pytest.raises(ValueError, match="quota_window"):
        fapi.server.faults.update({"quota_window": 0})


def test_rate_limit_answers_429_with_retry_after(fapi: Api, fns: str) -> None:
    fapi.server.faults.rate_limit = 5
    responses = [fapi.get("/api/companies/connections", ns=fns) for _ in range(20)]
    limited = [r for r in responses if r.status_code == 429]
    assert 5 <= len(responses) - len(limited) <= 8
    assert limited
    for response in limited:
        assert int(response.headers["retry-after"]) >= 1
        assert response.json()["message"]
    assert fapi.admin("stats").json()["injected"]["rate_limited"] >= len(limited)


def test_error_rate_gives_5xx(fapi: Api, fns: str) -> None:
    fapi.server.faults.error_rate = 1.0
    responses = [fapi.get("/api/companies/connections", ns=fns) for _ in range(30)]
    assert {r.status_code for r in responses} <= {500, 502, 503}
    assert len({r.status_code for r in responses}) > 1
    for response in responses:
        if response.status_code == 503:
            assert response.headers["retry-after"] == "1"
    fapi.server.faults.error_rate = 0.3
    share = _statuses(fapi, fns, 300)[200] / 300
    assert 0.55 < share < 0.85


def test_auth_endpoints_spared_unless_flagged(fapi: Api) -> None:
    fapi.server.faults.update({"error_rate": 1.0, "malformed_rate": 0.0})
    assert fapi.client.post("/api/auth", auth=("analyst@example.com",
                                               "sandbox-password")).status_code == 200
    fapi.server.faults.auth_faults = True
    assert fapi.client.post("/api/auth", auth=("analyst@example.com",
                                               "sandbox-password")).status_code >= 500


def test_admin_routes_never_faulted(fapi: Api) -> None:
    fapi.server.faults.update({"error_rate": 1.0, "latency_ms": 300, "rate_limit": 1})
    started = time.perf_counter()
    for _ in range(5):
        assert fapi.admin("faults").status_code == 200
    assert time.perf_counter() - started < 1.0


def test_malformed_bodies(fapi: Api, fns: str) -> None:
    fapi.server.faults.malformed_rate = 1.0
    kinds = set()
    for _ in range(12):
        response = fapi.get("/api/companies/connections", ns=fns)
        assert response.status_code == 200
        with pytest.raises(orjson.JSONDecodeError):
            orjson.loads(response.content)
        kinds.add(response.headers["content-type"].split(";")[0])
    assert kinds == {"application/json", "text/html"}


def test_reset_drops_connection_mid_response(fapi: Api, fns: str) -> None:
    fapi.server.faults.reset_rate = 1.0
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        fapi.get("/api/companies/connections", ns=fns)
    fapi.server.faults.reset_rate = 0.0
    assert fapi.get("/api/companies/connections", ns=fns).status_code == 200


def test_latency_and_jitter(fapi: Api, fns: str) -> None:
    fapi.server.faults.latency_ms = 150
    started = time.perf_counter()
    assert fapi.get("/api/companies/connections", ns=fns).status_code == 200
    assert time.perf_counter() - started >= 0.15
    fapi.server.faults.update({"latency_ms": 0, "jitter_ms": 100})
    elapsed = []
    for _ in range(8):
        started = time.perf_counter()
        fapi.get("/api/companies/connections", ns=fns)
        elapsed.append(time.perf_counter() - started)
    assert max(elapsed) - min(elapsed) > 0.01
    assert sum(elapsed) < 8 * 0.1 + 0.5


def _until_nothing_in_flight(api: Api, seconds: float = 10.0) -> None:
    """Wait until the sandbox has finished every request it got: one a client gave up on
    is still counted when its handler ends (a later test's counters must not see it)."""
    deadline = time.monotonic() + seconds
    while api.server.app.stats.in_flight:
        assert time.monotonic() < deadline, "a request is still in flight"
        time.sleep(0.01)


def test_slow_spikes_trigger_client_timeouts(fapi: Api, fns: str) -> None:
    fapi.server.faults.update({"slow_rate": 1.0, "slow_ms": 500})
    with pytest.raises(httpx.ReadTimeout):
        fapi.client.get("/api/companies/connections", headers=fapi.headers(fns), timeout=0.2)
    _until_nothing_in_flight(fapi)  # the sandbox still answers the abandoned request


def test_faults_admin_route_reads_and_validates(fapi: Api) -> None:
    updated = fapi.admin("faults", {"error_rate": 0.25, "token_lifetime": 60})
    assert updated.status_code == 200
    assert updated.json()["error_rate"] == 0.25
    assert fapi.server.faults.token_lifetime == 60
    assert fapi.admin("faults").json() == fapi.server.faults.to_dict()
    for bad in ({"error_rate": 2}, {"nonsense": 1}, {"latency_ms": -1}, {"auth_faults": "yes"}):
        assert fapi.admin("faults", bad).status_code == 400
    assert fapi.server.faults.error_rate == 0.25
    assert fapi.admin("faults", {"reset": True}).json() == Faults().to_dict()


def test_token_lifetime_switch(fapi: Api) -> None:
    fapi.server.faults.token_lifetime = 90
    claims: dict[str, Any] = jwt.decode(fapi.login(), options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 90


def test_stats_count_by_endpoint_and_status(fapi: Api, fns: str) -> None:
    _until_nothing_in_flight(fapi)  # an earlier test's request, given up on, is not counted here
    fapi.admin("stats/reset", {})
    fapi.get("/api/companies/connections", ns=fns)
    fapi.get(f"/api/companies/{fns}", ns=fns)
    fapi.get("/api/companies/connections")
    stats = fapi.admin("stats").json()
    assert stats["by_endpoint"]["5"] == {"200": 1, "400": 1}
    assert stats["by_endpoint"]["4"] == {"200": 1}
    assert stats["total"] == 3


def test_latency_spares_auth_unless_flagged(fapi: Api) -> None:
    fapi.server.faults.latency_ms = 400
    started = time.perf_counter()
    fapi.login()
    assert time.perf_counter() - started < 0.3
    fapi.server.faults.auth_faults = True
    started = time.perf_counter()
    fapi.login()
    assert time.perf_counter() - started >= 0.4


def test_fail_namespaces_answers_500_for_that_namespace_only(fapi: Api) -> None:
    failing, healthy = fapi.truth()["namespaces"]
    fapi.server.faults.fail_namespaces = [failing]
    assert fapi.get("/api/companies/connections", ns=failing).status_code == 500
    assert fapi.get(f"/api/companies/{failing}", ns=failing).status_code == 500
    assert fapi.get("/api/companies/connections", ns=healthy).status_code == 200
    assert fapi.get("/api/auth/user-info").status_code == 200


def test_deny_pairs_answers_403_while_rights_still_list_the_type(fapi: Api, fns: str) -> None:
    truth = fapi.truth()["per_namespace"][fns]
    company_id, type_id = next((c, t) for c, t in truth["questionnaires"] if c != fns)
    fapi.admin("faults", {"deny_pairs": [[company_id, type_id]]})
    detail = fapi.get(f"/api/companies/connections/{company_id}", ns=fns).json()
    assert type_id in detail["readingRights"]["received"]["companyTypeIds"]
    for path in (f"/api/companies/{company_id}/type/{type_id}/questionnaires",
                 f"/api/companies/{company_id}/company-types/{type_id}/documents"):
        assert fapi.get(path, ns=fns).status_code == 403
    other_company, other_type = next((c, t) for c, t in truth["questionnaires"]
                                     if (c, t) != (company_id, type_id))
    assert fapi.get(f"/api/companies/{other_company}/type/{other_type}/questionnaires",
                    ns=fns).status_code == 200
    assert fapi.admin("faults", {"deny_pairs": [["only-one"]]}).status_code == 400


def test_revoke_after_uses_revokes_every_token_after_n_uses(fapi: Api, fns: str) -> None:
    fapi.admin("faults", {"revoke_after_uses": 3})
    token = fapi.login()
    codes = [fapi.get("/api/companies/connections", ns=fns, token=token).status_code
             for _ in range(5)]
    assert codes == [200, 200, 200, 401, 401]
    fresh = fapi.login()  # a fresh login works, for its own N uses
    assert fapi.get("/api/auth/user-info", token=fresh).status_code == 200
    assert fapi.admin("stats").json()["injected"]["token_revoked"] == 1
    assert fapi.admin("faults", {"revoke_after_uses": -1}).status_code == 400


def test_misspelt_switch_is_an_error() -> None:
    with pytest.raises(AttributeError):
        Faults().error_rat = 0.5  # type: ignore[attr-defined]
