"""Downloads of signed URLs: no Authorization header, atomic file, size and SHA-256."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from pipelines.company_connections.errors import (
    DeniedError,
    RequestFailedError,
    ResponseFormatError,
)

from .fakes import FakeService

pytestmark = pytest.mark.anyio

CONTENT = b"%PDF-1.7\n" + bytes(range(256)) * 1000


def _files(requests: list[httpx.Request], failures: int = 0):
    state = {"n": 0}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.host != "files.test":
            raise AssertionError("only the file host is expected")
        requests.append(request)
        state["n"] += 1
        if state["n"] <= failures:
            return httpx.Response(503, text="busy")
        if request.url.path == "/denied":
            return httpx.Response(403, text="signature expired")
        return httpx.Response(200, content=CONTENT, headers={"content-type": "application/pdf"})

    return handler


async def test_download_streams_to_file_without_authorization(tmp_path) -> None:
    service = FakeService()
    seen: list[httpx.Request] = []
    async with service.client(transport=httpx.MockTransport(_files(seen, failures=1))) as client:
        result = await client.download("https://files.test/d1?sig=s3cr3t&exp=1",
                                       tmp_path / "docs" / "cert.pdf")
    assert result.size == len(CONTENT)
    assert result.sha256 == hashlib.sha256(CONTENT).hexdigest()
    assert result.content_type == "application/pdf"
    assert (tmp_path / "docs" / "cert.pdf").read_bytes() == CONTENT
    assert [p.name for p in (tmp_path / "docs").iterdir()] == ["cert.pdf"]
    assert len(seen) == 2  # one 503, then success
    assert all("Authorization" not in r.headers for r in seen)


async def test_download_denied_leaves_no_file(tmp_path) -> None:
    service = FakeService()
    seen: list[httpx.Request] = []
    async with service.client(transport=httpx.MockTransport(_files(seen))) as client:
        with pytest.raises(DeniedError) as info:
            await client.download("https://files.test/denied?sig=s3cr3t", tmp_path / "x.pdf")
    assert "s3cr3t" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


async def test_download_gives_up_after_max_attempts(tmp_path) -> None:
    service = FakeService()
    seen: list[httpx.Request] = []
    async with service.client(transport=httpx.MockTransport(_files(seen, failures=99)),
                              max_attempts=3) as client:
        with pytest.raises(RequestFailedError) as info:
            await client.download("https://files.test/d1?sig=s3cr3t", tmp_path / "x.pdf")
    assert info.value.attempts == 3 and info.value.path == "/d1"
    assert list(tmp_path.iterdir()) == []


async def test_download_over_plain_http_to_a_remote_host_is_refused(tmp_path) -> None:
    service = FakeService()
    async with service.client() as client:
        with pytest.raises(ResponseFormatError, match="plain http"):
            await client.download("http://files.example.com/d1", tmp_path / "x.pdf")


async def test_download_over_max_download_bytes_is_refused_and_leaves_no_file(tmp_path) -> None:
    service = FakeService()
    seen: list[httpx.Request] = []

    def unannounced(request: httpx.Request) -> httpx.Response:
        seen.append(request)  # no content-length: counted while streaming
        return httpx.Response(200, stream=httpx.ByteStream(CONTENT))

    for transport in (httpx.MockTransport(_files(seen)), httpx.MockTransport(unannounced)):
        async with service.client(transport=transport, max_download_bytes=100_000,
                                  max_response_bytes=10, max_attempts=4) as client:
            with pytest.raises(RequestFailedError) as info:
                await client.download("https://files.test/d1?sig=s3cr3t", tmp_path / "x.pdf")
        assert info.value.attempts == 1 and info.value.last_error == "ResponseTooLarge"
        assert "max_download_bytes (100000)" in str(info.value)
        assert list(tmp_path.iterdir()) == []
    assert len(seen) == 2
    async with service.client(transport=httpx.MockTransport(_files(seen)),
                              max_response_bytes=10) as client:  # the JSON cap does not apply
        assert (await client.download("https://files.test/d1", tmp_path / "y.pdf")).size == len(CONTENT)
