"""Login, single-flight renewal, 401 recovery and token-only mode with a token store."""

from __future__ import annotations

import asyncio
import os
import stat
import time

import httpx
import pytest

from pipelines.company_connections.auth import FileTokenStore, TokenManager, token_info
from pipelines.company_connections.errors import AuthenticationError
from pipelines.company_connections.settings import MAX_RELOGINS_PER_REQUEST

from .fakes import FakeService, make_jwt

pytestmark = pytest.mark.anyio

NS = "ns-1"
COMPANY = "/api/companies/c-1"


def _due_for_renewal() -> str:
    """A token issued long ago that expires soon: inside its renewal margin."""
    now = time.time()
    return make_jwt(iat=now - 100_000, exp=now + 600)


async def test_renewal_is_single_flight_under_50_concurrent_requests() -> None:
    service = FakeService(token_factory=_due_for_renewal)
    old = service.issue()
    service.token_factory = make_jwt  # the renewed token is a normal 7-day token
    service.route("GET", COMPANY, json={"id": "c-1"})
    async with service.client(access_token=old, email=None, password=None) as client:
        results = await asyncio.gather(*(client.company(NS, "c-1") for _ in range(50)))
        new = client.tokens.current
    assert len(results) == 50
    assert service.renew_calls == 1
    assert service.login_calls == 0
    assert new != old and new in service.valid
    sent = [r.headers["Authorization"] for r in service.calls(COMPANY)]
    assert sent == [f"Bearer {new}"] * 50
    assert client.stats.renewals == 1


async def test_renewal_after_login_when_the_login_token_is_due() -> None:
    service = FakeService(token_factory=_due_for_renewal)
    service.route("GET", COMPANY, json={"id": "c-1"})

    async def renew_hook() -> None:
        service.token_factory = make_jwt

    service.renew_hook = renew_hook
    async with service.client() as client:
        await asyncio.gather(*(client.company(NS, "c-1") for _ in range(20)))
    assert (service.login_calls, service.renew_calls) == (1, 1)


async def test_in_flight_request_with_replaced_token_retries_without_relogin() -> None:
    service = FakeService()
    renewed = asyncio.Event()
    entered = asyncio.Event()
    first = {"done": False}

    async def slow_company(request: httpx.Request) -> httpx.Response:
        if not first["done"]:
            first["done"] = True
            entered.set()
            await renewed.wait()  # meanwhile the token is renewed and the old one dies
            return httpx.Response(401, json={"error": "token invalidated"})
        return httpx.Response(200, json={"id": "c-1"})

    service.route("GET", COMPANY, slow_company)
    async with service.client() as client:
        task = asyncio.create_task(client.company(NS, "c-1"))
        await entered.wait()
        old = client.tokens.current
        await client.renew_token()
        renewed.set()
        company = await task
        assert company.id == "c-1"
        auths = [r.headers["Authorization"] for r in service.calls(COMPANY)]
        assert auths == [f"Bearer {old}", f"Bearer {client.tokens.current}"]
    assert service.login_calls == 1  # the initial login only
    assert client.stats.relogins == 0 and client.stats.renewals == 1


async def test_401_causes_one_relogin_and_one_retry() -> None:
    service = FakeService()
    service.route("GET", COMPANY, json={"id": "c-1"})
    async with service.client() as client:
        await client.company(NS, "c-1")
        service.valid.clear()  # the service forgets every token (e.g. it restarted)
        results = await asyncio.gather(*(client.company(NS, "c-1") for _ in range(10)))
    assert [c.id for c in results] == ["c-1"] * 10
    assert service.login_calls == 2  # initial + exactly one re-login for all ten
    assert client.stats.relogins == 1


async def test_fresh_tokens_rejected_again_and_again_raise_authentication_error() -> None:
    """Each 401 on a fresh token is a new revocation, followed up to a per-request bound."""
    service = FakeService()
    service.route("GET", COMPANY, lambda r: httpx.Response(401, json={"error": "nope"}))
    async with service.client() as client:
        with pytest.raises(AuthenticationError, match="after logging in again 5 times") as info:
            await client.company(NS, "c-1")
    assert service.login_calls == 1 + MAX_RELOGINS_PER_REQUEST
    assert len(service.calls(COMPANY)) == 1 + MAX_RELOGINS_PER_REQUEST
    assert info.value.status_code == 401 and info.value.path == COMPANY


async def test_bad_password_is_an_authentication_error_without_retries() -> None:
    service = FakeService()
    service.route("GET", COMPANY, json={"id": "c-1"})
    async with service.client(password="wrong-password") as client:
        with pytest.raises(AuthenticationError, match="login rejected"):
            await client.company(NS, "c-1")
    assert service.login_calls == 1


async def test_renewal_rejected_falls_back_to_relogin() -> None:
    service = FakeService()
    service.route("GET", COMPANY, json={"id": "c-1"})
    stale = _due_for_renewal()  # valid-looking but unknown to the service
    async with service.client(access_token=stale) as client:
        assert (await client.company(NS, "c-1")).id == "c-1"
    assert (service.renew_calls, service.login_calls) == (1, 1)
    assert client.stats.relogins == 1


async def test_token_only_renewal_is_persisted_with_mode_0600(tmp_path) -> None:
    service = FakeService(token_factory=_due_for_renewal)
    old = service.issue()
    service.token_factory = make_jwt
    service.route("GET", COMPANY, json={"id": "c-1"})
    path = tmp_path / "secrets" / "nested" / "token"
    store = FileTokenStore(path)
    async with service.client(email=None, password=None, access_token=old,
                              token_store=store) as client:
        await client.company(NS, "c-1")
        new = client.tokens.current
    assert new != old
    assert path.read_text() == new
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert [p.name for p in path.parent.iterdir()] == ["token"]  # no temp files left


async def test_token_only_prefers_a_newer_stored_token(tmp_path) -> None:
    now = time.time()
    configured = make_jwt(iat=now - 3600)
    stored = make_jwt(iat=now - 60)
    service = FakeService()
    service.issue(stored)  # renewal elsewhere invalidated the configured one
    service.route("GET", COMPANY, json={"id": "c-1"})
    store = FileTokenStore(tmp_path / "token")
    store.save(stored)
    async with service.client(email=None, password=None, access_token=configured,
                              token_store=store) as client:
        await client.company(NS, "c-1")
    (request,) = service.calls(COMPANY)
    assert request.headers["Authorization"] == f"Bearer {stored}"
    assert service.renew_calls == 0


@pytest.mark.parametrize("stored_kind", ["older", "expired"])
async def test_token_only_ignores_an_older_or_expired_stored_token(tmp_path, stored_kind) -> None:
    now = time.time()
    configured = make_jwt(iat=now - 60)
    if stored_kind == "older":
        stored = make_jwt(iat=now - 3600)
    else:
        stored = make_jwt(iat=now - 30, exp=now - 1)
    service = FakeService()
    service.issue(configured)
    service.route("GET", COMPANY, json={"id": "c-1"})
    store = FileTokenStore(tmp_path / "token")
    store.save(stored)
    async with service.client(email=None, password=None, access_token=configured,
                              token_store=store) as client:
        await client.company(NS, "c-1")
    (request,) = service.calls(COMPANY)
    assert request.headers["Authorization"] == f"Bearer {configured}"


async def test_token_only_rejected_token_gives_a_clear_error() -> None:
    service = FakeService()
    service.route("GET", COMPANY, json={"id": "c-1"})
    dead = make_jwt()
    async with service.client(email=None, password=None, access_token=dead) as client:
        with pytest.raises(AuthenticationError, match="renewed elsewhere") as info:
            await client.company(NS, "c-1")
    assert "set a fresh access_token or a password" in str(info.value)
    assert dead not in str(info.value) and dead not in repr(info.value)
    assert service.renew_calls == 1 and service.login_calls == 0


async def test_short_lived_tokens_renew_at_a_quarter_of_their_life() -> None:
    clock = {"now": 1_000_000.0}

    async def login() -> str:
        return make_jwt(iat=clock["now"], exp=clock["now"] + 4)

    renewals: list[float] = []

    async def renew(token: str) -> str:
        renewals.append(clock["now"])
        return make_jwt(iat=clock["now"], exp=clock["now"] + 4)

    manager = TokenManager(login=login, renew=renew, renew_margin_seconds=3600,
                           clock=lambda: clock["now"])
    first = await manager.get()
    for step in range(1, 13):  # 6 seconds in 0.5 s steps
        clock["now"] = 1_000_000.0 + step * 0.5
        await manager.get()
    assert renewals == [1_000_003.0, 1_000_006.0]
    assert token_info(first).expires_at == 1_000_004.0
    assert "eyJ" not in repr(manager)


async def test_missing_exp_assumes_seven_days() -> None:
    async def login() -> str:
        return "opaque-token-without-claims"

    async def renew(token: str) -> str:
        raise AssertionError("not due")

    manager = TokenManager(login=login, renew=renew, clock=lambda: 0.0)
    assert await manager.get() == "opaque-token-without-claims"
    assert manager.expires_at == 7 * 24 * 3600
    assert manager.renew_at == 7 * 24 * 3600 - 3600


async def test_explicit_login_replaces_the_token() -> None:
    service = FakeService()
    service.route("GET", COMPANY, json={"id": "c-1"})
    async with service.client() as client:
        first = await client.login()
        second = await client.login()
        await client.company(NS, "c-1")
    assert first != second and service.login_calls == 2
    (request,) = service.calls(COMPANY)
    assert request.headers["Authorization"] == f"Bearer {second}"
    assert client.stats.logins == 2


async def test_explicit_login_needs_a_password() -> None:
    from pipelines.company_connections.errors import ConfigurationError

    service = FakeService()
    async with service.client(email=None, password=None, access_token=make_jwt()) as client:
        with pytest.raises(ConfigurationError):
            await client.login()


async def test_failed_scheduled_renewal_keeps_the_valid_token() -> None:
    service = FakeService(token_factory=_due_for_renewal)
    token = service.issue()
    service.route("GET", COMPANY, json={"id": "c-1"})

    async def broken_renewal() -> None:
        raise httpx.ConnectError("renewal backend down")

    service.renew_hook = broken_renewal
    async with service.client(access_token=token, email=None, password=None,
                              max_attempts=2) as client:
        for _ in range(3):
            assert (await client.company(NS, "c-1")).id == "c-1"
        assert client.tokens.current == token
    assert service.renew_calls == 2  # one scheduled renewal (2 attempts), then a pause


class _Storm(FakeService):
    """Every token dies after `uses` uses on the data endpoints (a token storm)."""

    def __init__(self, uses: int) -> None:
        super().__init__()
        self.uses_left: dict[str, int] = {}
        self.limit = uses
        self.revoked = 0

    def issue(self, token: str | None = None) -> str:
        token = super().issue(token)
        self.uses_left[token] = self.limit
        return token

    async def handle(self, request: httpx.Request) -> httpx.Response:
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ")
        if request.url.path == COMPANY:
            await asyncio.sleep(0.001)
        if token in self.valid and request.url.path == COMPANY:
            self.uses_left[token] -= 1
            if self.uses_left[token] < 0:
                self.valid.discard(token)
                self.revoked += 1
        return await super().handle(request)


async def test_token_storm_is_survived_with_one_relogin_per_revocation() -> None:
    service = _Storm(uses=10)
    service.route("GET", COMPANY, json={"id": "c-1"})
    async with service.client(max_concurrency=16) as client:
        results = await asyncio.gather(*(client.company(NS, "c-1") for _ in range(300)))
    assert [c.id for c in results] == ["c-1"] * 300
    assert service.revoked >= 25
    assert client.stats.relogins == service.revoked  # single-flight: one per revocation
    assert service.login_calls == 1 + service.revoked


async def test_exhausted_relogin_budget_fails_with_a_clear_message() -> None:
    service = _Storm(uses=2)
    service.route("GET", COMPANY, json={"id": "c-1"})
    async with service.client(relogin_budget=3) as client:
        with pytest.raises(AuthenticationError, match="re-login budget exhausted") as info:
            for _ in range(50):
                await client.company(NS, "c-1")
    assert client.stats.relogins == 3
    assert "raise relogin_budget" in str(info.value)
