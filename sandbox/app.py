"""The sandbox's ASGI application: routing, the 11 API endpoints, signed downloads.

A hand-rolled ASGI router keeps the per-request cost small: the path is split
once and matched by segment count and literals, tokens are checked against a
memo, and successful bodies are serialised once with orjson and cached as bytes
until the world changes (``World.generation``).

Status codes: 401 for a missing, malformed, badly signed, expired or revoked
token (endpoints 2-11) or bad Basic credentials (1); 400 for a missing or
malformed ``x-namespace`` (required on 4-11, optional on 3); 403 for a
namespace the user does not belong to, or for a company type the namespace
may not read; 404 for companies, connections, fields, answers and documents
it cannot see; 405 for a wrong method. Every error body is
``{"message": "..."}``. Admin routes live in :mod:`sandbox.admin`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import math
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qs, quote

import orjson

from sandbox.admin import handle_admin
from sandbox.auth import AuthError, Claims, TokenAuthority
from sandbox.faults import FaultInjector, Faults, Outcome
from sandbox.hostile import hostile_error
from sandbox.world import Access, World

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]
Result = tuple[int, bytes, Headers | None]

JSON = b"application/json"
_CACHE_LIMIT = 60_000
NAMESPACE_PREFIX = "/api/company/"


@lru_cache(maxsize=256)
def error_body(message: str) -> bytes:
    """``{"message": message}`` as bytes."""
    return orjson.dumps({"message": message})


def error(status: int, message: str, headers: Headers | None = None) -> Result:
    """An error result with a JSON ``{"message"}`` body."""
    return status, error_body(message), headers


def route(method: str, path: str) -> tuple[int, tuple[str, ...]]:
    """Map an API request to (endpoint number 1-11, path arguments).

    Returns endpoint 0 for an unknown path and -1 for a known path with the
    wrong method.
    """
    p = path.split("/")
    n = len(p)
    if n < 3 or p[1] != "api" or "" in p[2:]:
        return 0, ()
    endpoint, args = 0, ()
    a = p[2]
    if a == "companies":
        if n == 4:
            endpoint, args = (5, ()) if p[3] == "connections" else (4, (p[3],))
        elif n == 5 and p[3] == "connections":
            endpoint, args = 6, (p[4],)
        elif n == 7:
            kind, last = p[4], p[6]
            if kind == "type" and last == "questionnaires":
                endpoint, args = 7, (p[3], p[5])
            elif kind == "field" and last == "information":
                endpoint, args = 9, (p[3], p[5])
            elif kind == "company-types" and last == "documents":
                endpoint, args = 10, (p[3], p[5])
    elif a == "auth":
        if n == 3:
            return (1, ()) if method == "POST" else (-1, ())
        if n == 4 and p[3] == "token":
            endpoint = 2
        elif n == 4 and p[3] == "user-info":
            endpoint = 3
    elif a == "company-type" and n == 5 and p[4] == "questionnaires":
        endpoint, args = 8, (p[3],)
    elif a == "documents" and n == 5 and p[4] == "url":
        endpoint, args = 11, (p[3],)
    if endpoint and method != "GET":
        return -1, ()
    return endpoint, args


class Stats:
    """Request counters: per endpoint number and status, injected faults, downloads, and
    the most API requests in flight at once (``in_flight_peak``, over every client)."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.reset()

    def reset(self) -> None:
        """Zero every counter (the peak starts again from what is in flight now)."""
        self.by_endpoint: defaultdict[str, defaultdict[str, int]] = defaultdict(
            lambda: defaultdict(int))
        self.injected: defaultdict[str, int] = defaultdict(int)
        self.files: defaultdict[str, int] = defaultdict(int)
        self.total = 0
        self.in_flight_peak = self.in_flight

    def record(self, endpoint: int, status: int | str) -> None:
        """Count one API request (endpoint 0 = unknown path, -1 = wrong method)."""
        key = str(endpoint) if endpoint > 0 else "other"
        self.by_endpoint[key][str(status)] += 1
        self.total += 1

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready counters; ``by_endpoint`` maps "1".."11" to {status: count}."""
        return {
            "total": self.total,
            "by_endpoint": {k: dict(v) for k, v in sorted(self.by_endpoint.items(),
                                                          key=lambda kv: (len(kv[0]), kv[0]))},
            "injected": dict(self.injected),
            "files": dict(self.files),
            "in_flight_peak": self.in_flight_peak,
        }


class SandboxApp:
    """ASGI app serving one :class:`World` with the given :class:`Faults`.

    ``page_size`` (None = off) and ``url_ttl_seconds`` are plain attributes and
    may be changed while serving.
    """

    def __init__(self, world: World, faults: Faults, *, email: str, password: str,
                 url_ttl_seconds: float = 60, page_size: int | None = None,
                 renew_expired: bool = False) -> None:
        self.world = world
        self.faults = faults
        self.auth = TokenAuthority(email, password, renew_expired=renew_expired)
        self.injector = FaultInjector(faults, seed=world.seed)
        self.stats = Stats()
        self.url_ttl_seconds = url_ttl_seconds
        self.page_size = page_size
        self._url_key = hashlib.sha256(b"sandbox-url" + str(id(self)).encode()
                                       + str(time.time()).encode()).digest()
        self._cache: dict[tuple[Any, ...], bytes] = {}
        self._cache_generation = world.generation

    # ------------------------------------------------------------ ASGI entry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path: str = scope["path"]
            if path.startswith("/api/"):
                stats = self.stats
                stats.in_flight += 1
                stats.in_flight_peak = max(stats.in_flight_peak, stats.in_flight)
                try:
                    await self._api(scope, send)
                finally:
                    stats.in_flight -= 1
            elif path.startswith("/_files/"):
                await respond(send, *self._download(scope))
            elif path.startswith("/_sandbox/"):
                await respond(send, *await handle_admin(self, scope, receive))
            else:
                await respond(send, *error(404, "Not found"))
        elif kind == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return

    async def _api(self, scope: Scope, send: Send) -> None:
        endpoint, args = route(scope["method"], scope["path"])
        faults, injector = self.faults, self.injector
        refusal = self._refusal(endpoint)
        if refusal is not None:
            kind, status, message, wait = refusal
            self.stats.injected[kind] += 1
            self.stats.record(endpoint, status)
            await respond(send, *error(status, message, [(b"retry-after", str(wait).encode())]))
            return
        randomised = endpoint >= 3 or (endpoint > 0 and faults.auth_faults)
        if randomised and (faults.latency_ms or faults.jitter_ms or faults.slow_rate):
            pause = injector.delay()
            if faults.slow_rate and faults.slow_ms and pause * 1000 >= faults.slow_ms:
                self.stats.injected["slow"] += 1
            if pause > 0:
                await asyncio.sleep(pause)
        outcome = injector.outcome() if randomised else Outcome.NORMAL
        if outcome is Outcome.ERROR:
            status = injector.error_status()
            self.stats.injected["error"] += 1
            self.stats.record(endpoint, status)
            headers = [(b"retry-after", b"1")] if status == 503 else None
            await respond(send, *error(status, "Injected server error", headers))
            return
        if endpoint <= 0:
            result = error(405, "Method not allowed") if endpoint < 0 else error(404, "Not found")
        else:
            result = self._handle(endpoint, args, scope)
        if self.world.hostile and result[0] in (403, 404):
            result = hostile_error(result)
        if outcome is Outcome.MALFORMED:
            self.stats.injected["malformed"] += 1
            self.stats.record(endpoint, 200)
            content_type, body = injector.malformed(result[1])
            await respond(send, 200, body, None, content_type)
        elif outcome is Outcome.RESET:
            self.stats.injected["reset"] += 1
            self.stats.record(endpoint, "reset")
            await send_partial(send, result[0], result[1])
        else:
            self.stats.record(endpoint, result[0])
            await respond(send, *result)

    def _refusal(self, endpoint: int) -> tuple[str, int, str, int] | None:
        """The rate, quota or shedding fault that refuses this request, if any:
        (stats key, status, message, Retry-After seconds)."""
        faults, injector = self.faults, self.injector
        if faults.rate_limit > 0 and (wait := injector.throttle()) is not None:
            return "rate_limited", 429, "Too many requests", wait
        if faults.quota > 0 and (wait := injector.over_quota()) is not None:
            return "over_quota", 429, "Request quota exhausted", wait
        if endpoint >= 3 and (status := injector.shed()) is not None:
            if status == 429:
                return "shed", 429, "Service busy, try again later", faults.shed_retry_after
            return "error", 503, "Service busy, try again later", 1
        return None

    # ------------------------------------------------------------ endpoints

    def _count_use(self, claims: Claims) -> None:
        try:
            self.auth.use(claims, self.faults.revoke_after_uses)
        except AuthError:
            self.stats.injected["token_revoked"] += 1
            raise

    def _handle(self, endpoint: int, args: tuple[str, ...], scope: Scope) -> Result:
        authorization = namespace = host = None
        for key, value in scope["headers"]:
            if key == b"authorization":
                authorization = value.decode("latin-1")
            elif key == b"x-namespace":
                namespace = value.decode("latin-1")
            elif key == b"host":
                host = value.decode("latin-1")
        lifetime = self.faults.token_lifetime
        try:
            if endpoint == 1:
                self.auth.check_basic(authorization)
                return 200, orjson.dumps({"token": self.auth.issue(lifetime)}), None
            if endpoint == 2:
                return 200, orjson.dumps({"token": self.auth.renew(authorization, lifetime)}), None
            claims = self.auth.verify_header(authorization)
            if self.faults.revoke_after_uses:
                self._count_use(claims)
        except AuthError as exc:
            scheme = b'Basic realm="sandbox"' if endpoint == 1 else b'Bearer realm="sandbox"'
            return error(401, str(exc), [(b"www-authenticate", scheme)])
        world = self.world
        if namespace is None:
            if endpoint == 3:
                return 200, self._user_info(), None
            return error(400, "Missing x-namespace header")
        ns_id = parse_namespace(namespace)
        if ns_id is None:
            return error(400, "Malformed x-namespace header; expected /api/company/{company-id}")
        if world.namespace(ns_id) is None:
            return error(403, "Not a member of this company")
        if self.faults.fail_namespaces and ns_id in self.faults.fail_namespaces:
            self.stats.injected["namespace_failure"] += 1
            return error(500, "Injected failure for this namespace")
        if endpoint == 3:
            return 200, self._user_info(), None
        if endpoint == 4:
            company = world.company_for(ns_id, args[0])
            if company is None:
                return error(404, "Company not found")
            return 200, self._cached(("company", args[0]), lambda: world.with_keys("company", company)), None
        if endpoint == 5:
            return self._page(scope, host, ("connections", ns_id),
                              lambda: [world.with_keys("connections", e) for e in world.connection_list(ns_id)])
        if endpoint == 6:
            detail = world.connection_detail(ns_id, args[0])
            if detail is None:
                return error(404, "Connection not found")
            return 200, self._cached(("detail", ns_id, args[0]), lambda: world.with_keys("connection", detail)), None
        if endpoint == 8:
            type_id = args[0]
            if type_id not in world.template_types(ns_id):  # memoised per namespace
                return error(403, "Company type not readable in this namespace")
            return 200, self._cached(("template", type_id),
                                     lambda: world.with_keys("template", world.template(type_id) or {})), None
        if endpoint == 9:
            company_id, field_id = args
            type_id = world.field_type_id(field_id)
            if type_id is None:
                return error(404, "Field not found")
        elif endpoint == 11:
            found = world.document(args[0])
            if found is None:
                return error(404, "Document not found")
            company_id, type_id = found[0], found[1]
        else:
            company_id, type_id = args
        access = world.access(ns_id, company_id, type_id)
        if access is Access.NOT_FOUND:
            return error(404, "Company is neither this company nor one of its connections")
        if access is Access.FORBIDDEN:
            return error(403, "No reading rights for this company type")
        if self.faults.deny_pairs and self.faults.denies(company_id, type_id):
            self.stats.injected["denied"] += 1
            return error(403, "Reading rights for this company type were withdrawn")
        if endpoint == 7:
            return 200, self._cached(("questionnaire", company_id, type_id),
                                     lambda: world.with_keys("questionnaire",
                                                             world.questionnaire(company_id, type_id))), None
        if endpoint == 9:
            info = world.answers(company_id, type_id).get(field_id)
            if info is None:
                return error(404, "Field has no answer")
            return 200, self._cached(("information", company_id, field_id),
                                     lambda: {"information": info}), None
        if endpoint == 10:
            return self._page(scope, host, ("documents", company_id, type_id),
                              lambda: [world.with_keys("documents", d) for d in world.documents(company_id, type_id)])
        url = self.signed_url(args[0], host or _server_host(scope))
        return 200, orjson.dumps({"url": url}), None

    def _user_info(self) -> bytes:
        return self._cached(("user-info",), lambda: self.world.user_info(self.auth.email))

    def _cached(self, key: tuple[Any, ...], build: Callable[[], Any]) -> bytes:
        if self._cache_generation != self.world.generation:
            self._cache.clear()
            self._cache_generation = self.world.generation
        body = self._cache.get(key)
        if body is None:
            body = orjson.dumps(build())
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.pop(next(iter(self._cache)))
            self._cache[key] = body
        return body

    def _page(self, scope: Scope, host: str | None, key: tuple[Any, ...],
              build: Callable[[], list[Any]]) -> Result:
        size = self.page_size
        if not size:
            return 200, self._cached(key, build), None
        page = 1
        if scope["query_string"]:
            values = parse_qs(scope["query_string"].decode("latin-1")).get("page")
            if values and values[0].isdigit() and int(values[0]) >= 1:
                page = int(values[0])
        items = build()
        start = (page - 1) * size
        body = self._cached((*key, "page", size, page), lambda: items[start:start + size])
        if start + size >= len(items):
            return 200, body, None
        link = f'<http://{host or _server_host(scope)}{scope["path"]}?page={page + 1}>; rel="next"'
        return 200, body, [(b"link", link.encode())]

    # ------------------------------------------------------------ signed downloads

    def _signature(self, document_id: str, expires: int) -> str:
        message = f"{document_id}:{expires}".encode()
        return hmac.new(self._url_key, message, hashlib.sha256).hexdigest()[:32]

    def signed_url(self, document_id: str, host: str) -> str:
        """Endpoint 11's link: valid for at least ``url_ttl_seconds`` (whole
        seconds, rounded up), no bearer token needed."""
        expires = math.ceil(time.time() + self.url_ttl_seconds)
        sig = self._signature(document_id, expires)
        return f"http://{host}/_files/{document_id}?expires={expires}&sig={sig}"

    def _download(self, scope: Scope) -> tuple[int, bytes, Headers | None, bytes]:
        document_id = scope["path"][len("/_files/"):]
        query = parse_qs(scope["query_string"].decode("latin-1"))
        expires_s, sig = query.get("expires", [""])[0], query.get("sig", [""])[0]
        status, body, headers, ctype = 403, error_body("Invalid signature"), None, JSON
        if expires_s.isdigit() and hmac.compare_digest(sig, self._signature(document_id,
                                                                            int(expires_s))):
            if time.time() > int(expires_s):
                status, body = 403, error_body("URL has expired")
            elif document_id in self.world.looping_files:
                status, body = 302, b""
                here = scope["path"] + "?" + scope["query_string"].decode("latin-1")
                headers = [(b"location", here.encode("latin-1"))]
            else:
                found = self.world.document_file(document_id)
                if found is None:
                    status, body = 404, error_body("Document not found")
                else:
                    name, body = found
                    status = 200
                    pdf = name.endswith(".pdf")
                    ctype = b"application/pdf" if pdf else b"application/octet-stream"
                    # RFC 6266/5987: any name (quotes, control characters) fits the header
                    headers = [(b"content-disposition",
                                f"attachment; filename*=UTF-8''{quote(name, safe='')}".encode("ascii"))]
        if self.world.hostile and status in (403, 404):
            status, body, headers = hostile_error((status, body, headers))
        self.stats.files[str(status)] += 1
        return status, body, headers, ctype


def parse_namespace(value: str) -> str | None:
    """Company id of an ``x-namespace`` value ``/api/company/{id}``, or None if malformed."""
    value = value.strip()
    if not value.startswith(NAMESPACE_PREFIX):
        return None
    company_id = value[len(NAMESPACE_PREFIX):]
    if not company_id or "/" in company_id or " " in company_id:
        return None
    return company_id


def _server_host(scope: Scope) -> str:
    server = scope.get("server") or ("127.0.0.1", 80)
    return f"{server[0]}:{server[1]}"


async def respond(send: Send, status: int, body: bytes, headers: Headers | None = None,
                  content_type: bytes = JSON) -> None:
    """Send a complete response."""
    head = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    if headers:
        head.extend(headers)
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body})


async def send_partial(send: Send, status: int, body: bytes) -> None:
    """Announce the full body, send only part of it, and return without
    completing: the server then closes the connection mid-response."""
    head = [(b"content-type", JSON), (b"content-length", str(len(body) + 64).encode())]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True})


def create_app(world: World, faults: Faults | None = None, *, email: str, password: str,
               url_ttl_seconds: float = 60, page_size: int | None = None,
               renew_expired: bool = False) -> SandboxApp:
    """The sandbox ASGI app for ``world``; ``faults`` (default: all off) is read
    on every request, so mutating it takes effect at once."""
    return SandboxApp(world, faults if faults is not None else Faults(), email=email,
                      password=password, url_ttl_seconds=url_ttl_seconds, page_size=page_size,
                      renew_expired=renew_expired)
