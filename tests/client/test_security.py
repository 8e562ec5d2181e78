"""Unsafe settings are refused, and secrets never leak into errors, reprs or logs."""

from __future__ import annotations

import logging

import httpx
import pytest

from pipelines.company_connections.client import ServiceClient
from pipelines.company_connections.errors import (
    AuthenticationError,
    ConfigurationError,
    RequestFailedError,
    ServiceError,
    redact,
)

from .fakes import EMAIL, PASSWORD, FakeService, make_jwt, sequence

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("url", [
    "http://service.example.com", "http://10.0.0.5:8080", "http://[2001:db8::1]/",
])
def test_plain_http_to_a_remote_host_is_refused(url: str) -> None:
    with pytest.raises(ConfigurationError, match="allow_insecure_http"):
        ServiceClient(url, email=EMAIL, password=PASSWORD)
    ServiceClient(url, email=EMAIL, password=PASSWORD, allow_insecure_http=True)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1:8765", "http://127.10.0.3", "http://localhost:8000/", "http://[::1]:9000",
    "https://service.example.com",
])
def test_loopback_http_and_https_are_allowed(url: str) -> None:
    ServiceClient(url, email=EMAIL, password=PASSWORD)


@pytest.mark.parametrize(("url", "match"), [
    ("ftp://service.example.com", "http"),
    ("service.example.com", "http"),
    (f"https://{EMAIL.replace('@', '%40')}:{PASSWORD}@service.example.com", "credentials"),
    ("https://service.example.com/?api_key=abc", "query"),
])
def test_bad_base_urls(url: str, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match) as info:
        ServiceClient(url, email=EMAIL, password=PASSWORD)
    assert PASSWORD not in str(info.value)


def test_credentials_and_tls_settings() -> None:
    with pytest.raises(ConfigurationError, match="no credentials"):
        ServiceClient("https://s.test")
    with pytest.raises(ConfigurationError, match="needs an email"):
        ServiceClient("https://s.test", password=PASSWORD)
    with pytest.raises(ConfigurationError, match="ca_bundle"):
        ServiceClient("https://s.test", access_token="t", ca_bundle="/nonexistent/ca.pem")
    assert ServiceClient("https://s.test", access_token="t")._verify is True
    assert ServiceClient("https://s.test", access_token="t", verify_tls=False)._verify is False


async def test_secrets_never_appear_in_errors_reprs_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    token = make_jwt()
    service = FakeService()
    service.issue(token)
    # error bodies that echo secrets back, as careless services do
    echo = f"bad request from {EMAIL} password={PASSWORD} Authorization: Bearer {token}"
    service.route("GET", "/api/companies/c-1", sequence(httpx.Response(500, text=echo)))
    service.route("GET", "/api/companies/c-2", lambda r: httpx.Response(401, text=echo))
    errors: list[ServiceError] = []
    async with service.client(access_token=token, max_attempts=2) as client:
        for company in ("c-1", "c-2"):
            with pytest.raises(ServiceError) as info:
                await client.company("ns", company)
            errors.append(info.value)
        texts = [repr(client), repr(client.tokens), repr(client.stats)]
    assert isinstance(errors[0], RequestFailedError)
    assert isinstance(errors[1], AuthenticationError)
    texts += [str(e) for e in errors] + [repr(e) for e in errors] + [e.message for e in errors]
    texts += [str(e.__cause__) for e in errors if e.__cause__]
    texts.append(caplog.text)
    current = client.tokens.current
    for text in texts:
        for secret in (PASSWORD, token, current, "Basic "):
            assert secret not in text, (secret, text)
    assert "***" in str(errors[0])


def test_redact_patterns() -> None:
    jwt_text = make_jwt()
    text = redact(f'{{"token": "abc.def", "jwt": "{jwt_text}"}} Basic dXNlcjpwYXNz x', ["zzz"])
    assert "abc.def" not in text and jwt_text not in text and "dXNlcjpwYXNz" not in text


def test_one_redaction_hides_every_shape_of_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """pipelines.secrets.redact serves the source, the CLI, the warehouse and the flows."""
    from diligence.errors import redact as warehouse_redact
    from flows import service
    from pipelines.secrets import redact as one

    assert warehouse_redact is one and redact is one and service.redact is one
    # the secrets in use, which a flow run reads from its config and its Prefect Secret
    # block (here no Prefect API: reading the block would start a temporary server)
    monkeypatch.setattr(service, "secret_values", lambda: ("s3cr3t-in-use",))
    cases = {
        "dbname=lake password='a secret' sslpassword=s2 host=h": ("a secret", "s2"),
        "postgres://user:pa55@host/db": ("pa55",),
        "aws_secret_access_key = AKIASECRET, session_token: TOK": ("AKIASECRET", "TOK"),
        "Authorization: Bearer tok3n": ("tok3n",),
        '{"accessToken": "tok-4", "password": "p\\"w"}': ("tok-4", 'p\\"w'),
    }
    for text, hidden in cases.items():
        shown = one(text)
        assert all(secret not in shown for secret in hidden), shown
    assert one("login a@b.example / hunter2 failed", ["hunter2"]) == "login a@b.example / *** failed"
    assert one("token_store_path=/tmp/t max_tokens=5") == "token_store_path=/tmp/t max_tokens=5"
    assert service.mask(f"error {make_jwt()} s3cr3t-in-use") == "error *** ***"
