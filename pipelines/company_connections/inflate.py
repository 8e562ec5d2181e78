"""Bodies decoded under a size cap, so a compressed body cannot inflate past it.

A few kilobytes of gzip can inflate to gigabytes (a decompression bomb). httpx's own
decoder inflates each received chunk whole; `BoundedDecoder` asks zlib for at most
``CHUNK`` bytes at a time (``max_length``) and counts every inflated byte, so memory
stays within the cap plus one chunk whatever the ratio. ``identity``, ``gzip`` and
``deflate`` (zlib or raw) are decoded; as in httpx, any other ``Content-Encoding`` is
read as it comes (still under the cap).
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator

import httpx

from . import settings as s

__all__ = ["CHUNK", "BodyTooLarge", "BoundedDecoder", "bounded_bytes"]

#: inflated bytes asked of zlib per call
CHUNK = s.DECODE_CHUNK_SIZE


class BodyTooLarge(Exception):
    """The decoded body passed the cap; `size` is how many bytes were decoded by then."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.size = size


class _Deflate:
    """zlib stream or raw deflate, decided on the first bytes (as httpx does)."""

    def __init__(self, wbits: int) -> None:
        self.first = wbits == zlib.MAX_WBITS
        self.zlib = zlib.decompressobj(wbits)

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if self.first and data:
            self.first = False
            try:
                return self.zlib.decompress(data, max_length)
            except zlib.error:
                self.zlib = zlib.decompressobj(-zlib.MAX_WBITS)
        return self.zlib.decompress(data, max_length)

    @property
    def unconsumed_tail(self) -> bytes:
        return self.zlib.unconsumed_tail


class BoundedDecoder:
    """Decodes one body (`encoding` as in ``Content-Encoding``); raises `BodyTooLarge`
    as soon as more than `cap` decoded bytes come out."""

    def __init__(self, encoding: str, cap: int) -> None:
        names = [name.strip().lower() for name in encoding.split(",")]
        known = [name for name in names if name in ("gzip", "x-gzip", "deflate")]
        self.inflater: _Deflate | None = None
        if len(known) == 1:
            self.inflater = _Deflate(zlib.MAX_WBITS | 16 if "gzip" in known[0] else zlib.MAX_WBITS)
        elif known:  # stacked encodings (never seen in practice): refused, not guessed
            raise httpx.DecodingError(f"the answer's Content-Encoding {encoding!r} is not supported")
        self.cap = cap
        self.size = 0

    def _count(self, data: bytes) -> bytes:
        self.size += len(data)
        if self.size > self.cap:
            raise BodyTooLarge(self.size)
        return data

    def decode(self, data: bytes) -> list[bytes]:
        """The decoded bytes of the next received `data`, in pieces of at most ``CHUNK``."""
        if self.inflater is None:
            return [self._count(data)] if data else []
        out: list[bytes] = []
        try:
            while data:
                piece = self.inflater.decompress(data, CHUNK)
                data = self.inflater.unconsumed_tail
                if piece:
                    out.append(self._count(piece))
                elif data:  # nothing out, input left: a corrupt stream would spin
                    break
        except zlib.error as exc:
            raise httpx.DecodingError(f"the answer's compressed body is corrupt: {exc}") from None
        return out


async def bounded_bytes(response: httpx.Response, cap: int) -> AsyncIterator[bytes]:
    """`response`'s body decoded as it streams, in pieces; `BodyTooLarge` past `cap`.
    A response built in memory (a mock transport) is already decoded: only counted."""
    if response.is_stream_consumed:
        decoder = BoundedDecoder("identity", cap)
        for start in range(0, len(response.content), CHUNK):
            for piece in decoder.decode(response.content[start:start + CHUNK]):
                yield piece
        return
    decoder = BoundedDecoder(response.headers.get("content-encoding", ""), cap)
    async for raw in response.aiter_raw():
        for piece in decoder.decode(raw):
            yield piece
