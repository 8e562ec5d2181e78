"""Size caps hold on inflated bytes: a small gzip body that inflates past the cap fails
early with one line, in bounded memory, on a real loopback server."""

from __future__ import annotations

import gzip
import tracemalloc

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from pipelines.company_connections.client import ServiceClient
from pipelines.company_connections.errors import RequestFailedError

from .loopback import LoopbackServer

pytestmark = pytest.mark.anyio

INFLATED = 100 * 1024 * 1024  # 100 MB of zeros ...
BOMB = gzip.compress(b"\0" * INFLATED, compresslevel=9)  # ... in about 100 KB
CAP = 1024 * 1024
#: well under the inflated size: the cap plus a few decoded pieces, and the server's copy
PEAK_LIMIT = 8 * 1024 * 1024


async def _bomb(request: Request) -> Response:
    return Response(BOMB, headers={"content-type": "application/json", "content-encoding": "gzip"})


def _server() -> LoopbackServer:
    return LoopbackServer(Starlette(routes=[
        Route("/api/companies/{company_id}", _bomb),
        Route("/files/{name}", _bomb),
    ]))


def _client(url: str) -> ServiceClient:
    return ServiceClient(url, access_token="loopback-token", max_attempts=3, backoff_initial=0.001,
                         backoff_max=0.01, max_response_bytes=CAP, max_download_bytes=CAP)


def test_the_bomb_is_small_and_inflates_far_past_the_cap() -> None:
    assert len(BOMB) < 200 * 1024 and INFLATED > 50 * CAP


async def test_a_gzip_answer_inflating_past_max_response_bytes_fails_in_bounded_memory() -> None:
    with _server() as server:
        async with _client(server.url) as client:
            tracemalloc.start()
            try:
                with pytest.raises(RequestFailedError) as info:
                    await client.company("ns-1", "c-1")
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
    assert info.value.attempts == 1 and info.value.last_error == "ResponseTooLarge"
    assert f"larger than max_response_bytes ({CAP}); refused" in str(info.value)
    assert "\n" not in str(info.value)
    assert peak < PEAK_LIMIT, f"peak {peak / 1e6:.1f} MB"


async def test_a_gzip_document_inflating_past_max_download_bytes_fails_in_bounded_memory(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with _server() as server:
        async with _client(server.url) as client:
            tracemalloc.start()
            try:
                with pytest.raises(RequestFailedError) as info:
                    await client.download(f"{server.url}/files/bomb.pdf", tmp_path / "bomb.pdf")
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
    assert info.value.last_error == "ResponseTooLarge"
    assert f"larger than max_download_bytes ({CAP}); refused" in str(info.value)
    assert list(tmp_path.iterdir()) == []
    assert peak < PEAK_LIMIT, f"peak {peak / 1e6:.1f} MB"


async def test_a_gzip_answer_under_the_cap_is_decoded() -> None:
    body = b'{"id": "c-1", "name": "' + b"A" * 300_000 + b'"}'

    async def small(request: Request) -> Response:
        return Response(gzip.compress(body), headers={"content-type": "application/json",
                                                      "content-encoding": "gzip"})

    with LoopbackServer(Starlette(routes=[Route("/api/companies/{company_id}", small)])) as server:
        async with _client(server.url) as client:
            assert (await client.company("ns-1", "c-1")).name == "A" * 300_000


@pytest.mark.parametrize("wbits", [15, -15, 31])  # zlib, raw deflate, gzip
def test_bounded_decoder_decodes_each_deflate_flavour_in_pieces(wbits: int) -> None:
    import zlib

    from pipelines.company_connections.inflate import CHUNK, BodyTooLarge, BoundedDecoder

    data = bytes(range(256)) * 2000
    packer = zlib.compressobj(9, zlib.DEFLATED, wbits)
    packed = packer.compress(data) + packer.flush()
    encoding = "gzip" if wbits == 31 else "deflate"
    pieces = BoundedDecoder(encoding, len(data)).decode(packed)
    assert b"".join(pieces) == data and max(map(len, pieces)) <= CHUNK
    with pytest.raises(BodyTooLarge):
        BoundedDecoder(encoding, len(data) - 1).decode(packed)
