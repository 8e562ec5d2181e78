"""Reading answers: JSON under a nesting cap, pages, tokens, Retry-After, HTML.

* `read_body`: the body read into memory, refused (`Retryable`, final) over the
  size cap, whether announced, counted while reading, or inflated by decompression.
* `parse_json`: the body through orjson; JSON nested deeper than
  ``MAX_JSON_DEPTH`` raises `Refused` (not retried). The depth is first bounded at C
  speed on the brackets alone (`_maybe_deeper_than`); only a body that may be too
  deep is walked (`_deeper_than`).
* `parse_page`: one page of a list endpoint, its items validated, and the next
  link from the body (``{items|data|results, next|nextPage|links.next}``) or the
  ``Link: <url>; rel="next"`` header.
* `parse_token`: the token of a login or renewal answer (JSON or plain text).
* `retry_after`: seconds from ``Retry-After`` (seconds or HTTP-date); the client
  fails a request told to wait longer than its `max_retry_after`.
* `response_text`, `is_html`: the start of a body for error messages, and whether
  an answer is an HTML page (a wrong `base_url` or a proxy's error page).
"""

from __future__ import annotations

import email.utils
import math
import time
from typing import Any

import httpx
import orjson

from . import settings as s
from .inflate import BodyTooLarge, bounded_bytes
from .models import split_page, token_from_body
from .retries import Retryable

__all__ = ["Refused", "is_html", "parse_json", "parse_page", "parse_token", "read_body",
           "response_text", "retry_after"]


class Refused(ValueError):
    """A body refused on sight (nested too deep): not retried."""


async def read_body(response: httpx.Response, request: httpx.Request,
                    cap: int) -> httpx.Response:
    """Read the body into memory, refusing one over `cap` bytes (`max_response_bytes`):
    announced, counted while read, or inflating past it (decoded under the cap as it
    streams, see :mod:`.inflate`, so a decompression bomb never fills memory)."""
    length = response.headers.get("content-length")
    try:
        if response.is_stream_consumed:  # built in memory (a mock transport)
            if len(response.content) > cap:
                raise _too_large(response.status_code, len(response.content), cap)
            return response
        if length is not None and length.isdigit() and int(length) > cap:
            raise _too_large(response.status_code, int(length), cap)
        try:
            chunks = [chunk async for chunk in bounded_bytes(response, cap)]
        except BodyTooLarge as exc:
            raise _too_large(response.status_code, exc.size, cap) from None
        headers = httpx.Headers(response.headers)
        headers.pop("content-encoding", None)  # the chunks are decoded already
        headers.pop("content-length", None)
        return httpx.Response(response.status_code, headers=headers, content=b"".join(chunks),
                              request=request, extensions=response.extensions)
    finally:
        if not response.is_closed:
            await response.aclose()


def _too_large(status: int, size: int, cap: int) -> Retryable:
    return Retryable("ResponseTooLarge", f"the answer ({size} bytes or more) is larger than "
                     f"max_response_bytes ({cap}); refused", status_code=status, final=True)


def retry_after(response: httpx.Response) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or HTTP-date; a date in
    the past is 0), or None without a readable one."""
    value = response.headers.get(s.RETRY_AFTER_HEADER)
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        seconds = when.timestamp() - time.time()
    if math.isnan(seconds):
        return None
    return max(seconds, 0.0)


def response_text(response: httpx.Response) -> str:
    try:
        return response.text[: s.MESSAGE_MAX_CHARS * 2]
    except (UnicodeDecodeError, LookupError, httpx.ResponseNotRead):
        return ""


def parse_json(response: httpx.Response) -> Any:
    """The body as JSON; raises `Refused` for nesting deeper than ``MAX_JSON_DEPTH``."""
    body = response.content
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "depth limit" in str(exc) or "recursion" in str(exc).lower():
            raise Refused(f"the JSON answer is nested deeper than {s.MAX_JSON_DEPTH} levels; "
                           "refused") from None
        raise
    if _maybe_deeper_than(body, s.MAX_JSON_DEPTH) and _deeper_than(data, s.MAX_JSON_DEPTH):
        raise Refused(f"the JSON answer is nested deeper than {s.MAX_JSON_DEPTH} levels; refused")
    return data


_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def _maybe_deeper_than(body: bytes, limit: int) -> bool:
    """False if `body`'s brackets nest at most `limit` deep (checked at C speed).

    Keeps only the brackets, then strips innermost pairs, one level or more per
    round. True (walk the parsed value to be sure) when they are still there after
    `limit` rounds or do not pair up (brackets inside strings).
    """
    brackets = body.translate(None, _NOT_BRACKETS)
    for _ in range(limit):
        if not brackets:
            return False
        shorter = brackets.replace(b"[]", b"").replace(b"{}", b"")
        if len(shorter) == len(brackets):
            return True
        brackets = shorter
    return bool(brackets)


def _deeper_than(value: Any, limit: int) -> bool:
    """True if `value` has containers nested more than `limit` deep."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if type(item) is dict else item if type(item) is list else ()
        stack.extend((child, depth + 1) for child in children
                     if type(child) is dict or type(child) is list)
    return False


def is_html(response: httpx.Response) -> bool:
    content_type = response.headers.get("content-type", "")
    return "html" in content_type.lower() or response.content.lstrip()[:1] == b"<"


def parse_token(response: httpx.Response) -> str:
    try:
        body = parse_json(response)
    except orjson.JSONDecodeError:
        body = response.text
    return token_from_body(body)


def parse_page(response: httpx.Response, items_adapter: Any) -> tuple[list[Any], str | None]:
    items, next_link = split_page(parse_json(response))
    return items_adapter.validate_python(items), next_link or response.links.get("next", {}).get("url")
