"""An in-memory emulation of the service for `httpx.MockTransport`, plus helpers."""

from __future__ import annotations

import base64
import inspect
import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import jwt

from pipelines.company_connections.client import ServiceClient

EMAIL = "analyst@example.com"
PASSWORD = "pw-Zq8!secret-horse"
BASE_URL = "https://service.test"
WEEK = 7 * 24 * 3600

Handler = Callable[[httpx.Request], httpx.Response | Awaitable[httpx.Response]]
_serial = itertools.count(1)


def make_jwt(*, iat: float | None = None, exp: float | None = None, lifetime: float = WEEK) -> str:
    """A signed JWT with `iat`/`exp` claims (``iat`` defaults to now)."""
    now = time.time()
    claims: dict[str, Any] = {"sub": "user-1", "jti": f"t{next(_serial)}"}
    if iat is not None or exp is None:
        claims["iat"] = int(iat if iat is not None else now)
    if exp is not None or lifetime:
        claims["exp"] = int(exp if exp is not None else claims.get("iat", now) + lifetime)
    return jwt.encode(claims, "server-signing-key-for-tests-only-0123456789", algorithm="HS256")


class FakeService:
    """Authentication as the spec says (renewal invalidates the old token) and
    registered routes for everything else.

    `routes[(method, raw_path)]` is a handler or a fixed response; a route whose
    handler raises an ``httpx`` exception simulates a transport failure.
    """

    def __init__(self, *, token_factory: Callable[[], str] | None = None) -> None:
        self.token_factory = token_factory or make_jwt
        self.valid: set[str] = set()
        self.routes: dict[tuple[str, str], Handler] = {}
        self.requests: list[httpx.Request] = []
        self.login_calls = 0
        self.renew_calls = 0
        self.login_body: Callable[[str], httpx.Response] = lambda t: httpx.Response(
            200, json={"token": t}
        )
        self.renew_hook: Callable[[], Awaitable[None]] | None = None

    # -- setup --------------------------------------------------------------------------
    def issue(self, token: str | None = None) -> str:
        token = token or self.token_factory()
        self.valid.add(token)
        return token

    def route(self, method: str, path: str, handler: Handler | None = None, *,
              json: Any = None, status: int = 200, headers: dict[str, str] | None = None,
              content: bytes | None = None) -> None:
        if handler is None:
            def handler(request: httpx.Request) -> httpx.Response:
                if content is not None:
                    return httpx.Response(status, content=content, headers=headers)
                return httpx.Response(status, json=json, headers=headers)
        self.routes[(method, path)] = handler

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def client(self, **kwargs: Any) -> ServiceClient:
        options: dict[str, Any] = {
            "email": EMAIL, "password": PASSWORD, "transport": self.transport(),
            "backoff_initial": 0.001, "backoff_max": 0.01,
        }
        options.update(kwargs)
        return ServiceClient(options.pop("base_url", BASE_URL), **options)

    # -- inspection ---------------------------------------------------------------------
    def calls(self, path: str) -> list[httpx.Request]:
        return [r for r in self.requests if _raw_path(r) == path]

    # -- handling -----------------------------------------------------------------------
    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = _raw_path(request)
        auth = request.headers.get("Authorization", "")
        if request.method == "POST" and path == "/api/auth":
            self.login_calls += 1
            expected = "Basic " + base64.b64encode(f"{EMAIL}:{PASSWORD}".encode()).decode()
            if auth != expected:
                return httpx.Response(401, json={"error": "bad credentials"})
            return self.login_body(self.issue())
        bearer = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        if request.method == "GET" and path == "/api/auth/token":
            self.renew_calls += 1
            if bearer not in self.valid:
                return httpx.Response(401, json={"error": "invalid token"})
            if self.renew_hook is not None:
                await self.renew_hook()
            self.valid.discard(bearer)
            return httpx.Response(200, json={"token": self.issue()})
        handler = self.routes.get((request.method, path))
        if bearer not in self.valid:
            return httpx.Response(401, json={"error": "invalid token"})
        if handler is None:
            return httpx.Response(404, json={"error": "no such resource"})
        result = handler(request)
        if inspect.isawaitable(result):
            result = await result
        return result


def _raw_path(request: httpx.Request) -> str:
    return request.url.raw_path.split(b"?", 1)[0].decode()


def sequence(*responses: httpx.Response | Exception) -> Handler:
    """A handler answering with `responses` in turn (the last one repeats)."""
    state = {"i": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        item = responses[min(state["i"], len(responses) - 1)]
        state["i"] += 1
        if isinstance(item, Exception):
            raise item
        return item

    return handler
