"""Where downloads may go and what they write: public addresses only (loopback when the
service itself is on loopback), checked on every redirect; no Authorization, on any
origin; no symlink in the download folder followed."""

from __future__ import annotations

import os

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from pipelines.company_connections.addresses import address_kind
from pipelines.company_connections.client import ServiceClient
from pipelines.company_connections.errors import ResponseFormatError

from .fakes import FakeService
from .loopback import LoopbackServer

pytestmark = pytest.mark.anyio

CONTENT = b"%PDF-1.7 document"


def _recording(seen: list[httpx.Request], redirect: str | None = None) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if redirect is not None and len(seen) == 1:
            return httpx.Response(302, headers={"location": redirect})
        return httpx.Response(200, content=CONTENT)

    return httpx.MockTransport(handler)


@pytest.mark.parametrize(("url", "kind"), [
    ("https://169.254.169.254/latest/meta-data", "link-local"),
    ("https://[fe80::1]/doc", "link-local"),
    ("https://10.1.2.3/doc", "private"),
    ("https://192.168.0.10/doc", "private"),
    ("https://[::ffff:10.0.0.1]/doc", "private"),
    ("https://100.64.0.1/doc", "private"),
    ("https://0.0.0.0/doc", "private"),
    ("https://127.0.0.1/doc", "loopback"),
    ("https://localhost/doc", "loopback"),
])
async def test_non_public_addresses_are_refused_unless_allowed(tmp_path, url: str, kind: str) -> None:  # type: ignore[no-untyped-def]
    seen: list[httpx.Request] = []
    async with FakeService().client(transport=_recording(seen)) as client:  # service on https
        with pytest.raises(ResponseFormatError) as info:
            await client.download(url, tmp_path / "x.pdf")
    assert f"resolves to a {kind} address" in str(info.value)
    assert "allow_private_downloads" in str(info.value)
    assert seen == [] and list(tmp_path.iterdir()) == []
    async with FakeService().client(transport=_recording(seen), allow_private_downloads=True) as client:
        assert (await client.download(url, tmp_path / "x.pdf")).size == len(CONTENT)


def test_address_kinds() -> None:
    import ipaddress

    assert address_kind(ipaddress.ip_address("93.184.216.34")) == "public"
    assert address_kind(ipaddress.ip_address("2606:4700::1")) == "public"
    assert address_kind(ipaddress.ip_address("::1")) == "loopback"
    assert address_kind(ipaddress.ip_address("224.0.0.1")) == "private"


async def test_a_redirect_to_a_private_address_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    seen: list[httpx.Request] = []
    transport = _recording(seen, redirect="https://169.254.169.254/latest/meta-data")
    async with FakeService().client(transport=transport) as client:
        with pytest.raises(ResponseFormatError, match="link-local"):
            await client.download("https://93.184.216.34/doc?sig=s3cr3t", tmp_path / "x.pdf")
    assert [r.url.host for r in seen] == ["93.184.216.34"]
    assert list(tmp_path.iterdir()) == []


async def test_a_redirect_to_plain_http_on_a_remote_host_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    seen: list[httpx.Request] = []
    transport = _recording(seen, redirect="http://93.184.216.35/doc")
    async with FakeService().client(transport=transport) as client:
        with pytest.raises(ResponseFormatError, match="plain http"):
            await client.download("https://93.184.216.34/doc", tmp_path / "x.pdf")
    assert len(seen) == 1


class _Recorder:
    """A loopback file host that records the Authorization header of each request."""

    def __init__(self, redirect_to: str | None = None) -> None:
        self.authorization: list[str | None] = []
        self.redirect_to = redirect_to
        self.server = LoopbackServer(Starlette(routes=[Route("/files/{name}", self.serve)]))

    async def serve(self, request: Request) -> Response:
        self.authorization.append(request.headers.get("authorization"))
        if self.redirect_to is not None:
            return RedirectResponse(self.redirect_to + request.url.path, status_code=302)
        return Response(CONTENT, media_type="application/pdf")


async def test_a_redirect_to_another_origin_carries_no_authorization(tmp_path) -> None:  # type: ignore[no-untyped-def]
    storage = _Recorder()
    with storage.server:
        service = _Recorder(redirect_to=storage.server.url)
        with service.server:
            assert service.server.url != storage.server.url  # two ports: two origins
            client = ServiceClient(service.server.url, access_token="service-token")
            async with client:
                result = await client.download(f"{service.server.url}/files/a.pdf?sig=1", tmp_path / "a.pdf")
    assert result.size == len(CONTENT)
    assert service.authorization == [None]  # the service's own origin gets none either
    assert storage.authorization == [None]


async def test_loopback_downloads_work_when_the_service_is_on_loopback(tmp_path) -> None:  # type: ignore[no-untyped-def]
    storage = _Recorder()
    with storage.server:
        async with ServiceClient(storage.server.url, access_token="t") as client:
            assert (await client.download(f"{storage.server.url}/files/a.pdf", tmp_path / "a.pdf")).size
        async with FakeService().client() as client:  # a remote (https) service: refused
            with pytest.raises(ResponseFormatError, match="loopback address"):
                await client.download(f"{storage.server.url}/files/a.pdf", tmp_path / "b.pdf")
    assert storage.authorization == [None]


async def test_a_symlink_placed_at_the_destination_is_replaced_not_followed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"keep me")
    folder = tmp_path / "documents"
    folder.mkdir()
    (folder / "cert.pdf").symlink_to(outside)
    seen: list[httpx.Request] = []
    async with FakeService().client(transport=_recording(seen)) as client:
        await client.download("https://93.184.216.34/cert.pdf", folder / "cert.pdf")
    assert outside.read_bytes() == b"keep me"
    assert not (folder / "cert.pdf").is_symlink() and (folder / "cert.pdf").read_bytes() == CONTENT
    assert sorted(os.listdir(folder)) == ["cert.pdf"]
