"""Fixtures for the sandbox contract tests: started servers and a small HTTP helper."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from sandbox import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer


class Api:
    """An httpx client bound to one sandbox, with a login and namespace helper."""

    def __init__(self, server: SandboxServer, timeout: float = 10.0) -> None:
        self.server = server
        self.client = httpx.Client(base_url=server.base_url, timeout=timeout)
        self.token: str | None = None

    def login(self, email: str = DEFAULT_EMAIL, password: str = DEFAULT_PASSWORD) -> str:
        """A fresh token (the helper's default token is left alone)."""
        response = self.client.post("/api/auth", auth=(email, password))
        assert response.status_code == 200, response.text
        return str(response.json()["token"])

    def headers(self, ns: str | None = None, token: str | None = None) -> dict[str, str]:
        if token is None and self.token is None:
            self.token = self.login()
        headers = {"Authorization": f"Bearer {token or self.token}"}
        if ns is not None:
            headers["x-namespace"] = f"/api/company/{ns}"
        return headers

    def get(self, path: str, ns: str | None = None, token: str | None = None,
            **kwargs: Any) -> httpx.Response:
        return self.client.get(path, headers=self.headers(ns, token), **kwargs)

    def truth(self) -> dict[str, Any]:
        return self.client.get("/_sandbox/truth").json()

    def admin(self, name: str, body: dict[str, Any] | None = None) -> httpx.Response:
        if body is None:
            return self.client.get(f"/_sandbox/{name}")
        return self.client.post(f"/_sandbox/{name}", json=body)

    def close(self) -> None:
        self.client.close()


@pytest.fixture(scope="session")
def api(shared_sandbox: SandboxServer) -> Iterator[Api]:
    client = Api(shared_sandbox)
    client.token = client.login()
    yield client
    client.close()


@pytest.fixture(scope="session")
def truth(api: Api) -> dict[str, Any]:
    return api.truth()


@pytest.fixture(scope="session")
def ns(truth: dict[str, Any]) -> str:
    """The first namespace of the shared sandbox."""
    return str(truth["namespaces"][0])


def _api_factory() -> Iterator[Callable[..., Api]]:
    started: list[tuple[SandboxServer, Api]] = []

    def factory(**kwargs: Any) -> Api:
        server = SandboxServer(**kwargs).start()
        client = Api(server)
        started.append((server, client))
        return client

    yield factory
    for server, client in started:
        client.close()
        server.stop()


@pytest.fixture
def make_api() -> Iterator[Callable[..., Api]]:
    """Start a dedicated sandbox (stopped after the test) and return an Api for it;
    keyword arguments go to :class:`SandboxServer`."""
    yield from _api_factory()


@pytest.fixture(scope="module")
def make_module_api() -> Iterator[Callable[..., Api]]:
    """Like ``make_api``, but the sandbox lives for the whole test module."""
    yield from _api_factory()
