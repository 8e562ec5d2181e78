"""Async HTTP client of the service: one typed method per endpoint.

`ServiceClient` owns one connection pool per run (use it as an async context
manager): by default the `transport.AiohttpTransport` (httpx's transport seam on
aiohttp), with as many connections as `max_concurrency`; any
`httpx.AsyncBaseTransport` can be passed as `transport=` instead (tests use
`httpx.MockTransport`). API requests are built as `httpx.Request`s and handed to
the transport directly; downloads go through an `httpx.AsyncClient` on the same
transport (they follow redirects). Every API request goes through one pipeline:

1. one of `max_concurrency` slots (a `limits.PriorityGate`: the first namespace's
   requests first) is held for the attempt only, never while waiting between retries
   (login and renewal requests bypass it, so requests holding a slot while they wait
   for a new token cannot starve them);
2. the current token is taken from the `TokenManager` at send time, once the
   request holds its slot (login and renewal happen there, single-flight);
3. with a `budget` (a `limits.RequestBudget` shared by the processes of one account,
   e.g. a Prefect global limit), each attempt also holds its share of it;
   the `AdaptiveThrottle` makes the request wait for any 429 cool-down and for the
   rate limit (an `aiolimiter.AsyncLimiter`), which starts at
   `requests_per_second` (None: unlimited) and adapts to 429s, cut only when going
   slower makes them stop (see `limits`);
4. `request_timeout` bounds the whole attempt, from sending to the body's last
   byte; a body over `max_response_bytes` (announced or counted) is refused;
5. a 401 is answered by retrying with the current token if the rejected one was
   already replaced, else by a re-login (or renewal in token-only mode) and a
   retry; the request keeps its slot meanwhile, so it goes out among the first with
   the new token. A 401 on a token the service took before is a revocation (a token
   storm), followed as far as `relogin_budget` per client allows; 401s on tokens it
   never took end a request after ``MAX_RELOGINS_PER_REQUEST`` re-logins, then
   `AuthenticationError`. Bad credentials are only a login that fails;
6. 403, 404, 400 and other 4xx raise `DeniedError`, `NotFoundError` and
   `BadRequestError` at once (a 404 page in HTML raises `ResponseFormatError`
   "... answered text/html, not JSON: check base_url"); 408, 429, 5xx, timeouts,
   connection and protocol errors and malformed bodies are retried with
   full-jitter exponential backoff (``Retry-After`` honoured on 429 and 503; one
   longer than `max_retry_after` fails the request at once) up to `max_attempts`,
   then raise `RequestFailedError` (`retries.RetryPolicy`: the first attempt runs
   bare, tenacity takes over after a retryable failure). A host name that does not
   resolve, an untrusted certificate, a body over the size cap and JSON nested
   deeper than ``MAX_JSON_DEPTH`` fail at once (`RequestFailedError` with one
   attempt, or `ResponseFormatError`), naming the URL or the cap (`statuses.StatusRules`).

Nothing is built per request that a request does not need: URLs are parsed once,
no retry object is built until an attempt fails, questionnaires keep their
forms raw (typed lazily), and the start-up heap is frozen out of the GC's scans
while the client is open (see `heap`).

List endpoints (5, 10) follow pagination if the service ever pages: a
``Link: <url>; rel="next"`` header, or an object body ``{items|data|results,
next|nextPage|links.next}``. Next links must stay on the service's origin; a
repeated page or more than ``MAX_PAGES`` pages raises `ResponseFormatError`.

This module holds the pipeline and the endpoints; its neighbours hold the rest:
`retries` (the attempt and backoff policy of step 6), `statuses` (what a status or a
transport failure makes of an attempt, step 6), `responses` (JSON under the nesting
cap, pages, tokens, ``Retry-After``, HTML detection), `urls` (settings checks, path
quoting, origins), `stats` (the traffic counters), `heap` (the GC's tuning) and
`downloads` (the download client, streaming a document to disk).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import math
import pathlib
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Self, TypeVar

import httpx

from . import settings as s
from .auth import TokenManager, TokenStore
from .downloads import DownloadResult, download_client, download_once
from .errors import (
    AuthenticationError,
    ConfigurationError,
    DeniedError,
    NotFoundError,
    ResponseFormatError,
    ServiceError,
)
from .evidence import Answer, EvidenceLog, last_answer, set_answer
from .heap import gc_tuning
from .limits import AdaptiveThrottle, PriorityGate, RequestBudget
from .manifest import Entry
from .models import (
    Company,
    ConnectionDetail,
    ConnectionEntry,
    Document,
    DocumentUrl,
    Questionnaire,
    UserInfo,
    adapter,
)
from .responses import Refused, is_html, parse_json, parse_page, parse_token, read_body
from .retries import Retryable, RetryPolicy
from .stats import RequestStats
from .statuses import TRANSPORT_ERRORS, StatusRules
from .transport import AiohttpTransport
from .urls import (
    checked_download_url,
    header_id,
    is_loopback,
    origin,
    path_of,
    segment,
    tls_verify,
    unsigned_url_answer,
    validate_base_url,
)

__all__ = ["DownloadResult", "RequestStats", "ServiceClient"]

T = TypeVar("T")

_BASIC, _BEARER, _GIVEN = "basic", "bearer", "given"


class ServiceClient:
    """Typed async client of the service (endpoints 1-11 of the specification).

    Credentials: `email` + `password` (login, re-login on 401), or `access_token`
    alone (token-only: renewed before expiry and saved to `token_store`). Settings
    are validated here and raise `ConfigurationError`; see the module docstring for
    the request pipeline.
    """

    def __init__(
        self,
        base_url: str,
        *,
        email: str | None = None,
        password: str | None = None,
        access_token: str | None = None,
        token_store: TokenStore | None = None,
        max_concurrency: int = s.DEFAULT_MAX_CONCURRENCY,
        requests_per_second: float | None = None,
        request_timeout: float = s.DEFAULT_REQUEST_TIMEOUT,
        max_attempts: int = s.DEFAULT_MAX_ATTEMPTS,
        backoff_initial: float = s.DEFAULT_BACKOFF_INITIAL,
        backoff_max: float = s.DEFAULT_BACKOFF_MAX,
        renew_margin_seconds: float = s.DEFAULT_RENEW_MARGIN_SECONDS,
        ca_bundle: str | None = None,
        verify_tls: bool = True,
        allow_insecure_http: bool = False,
        allow_private_downloads: bool = False,
        transport: httpx.AsyncBaseTransport | None = None,
        user_agent: str = s.USER_AGENT,
        max_response_bytes: int = s.DEFAULT_MAX_RESPONSE_BYTES,
        max_download_bytes: int = s.DEFAULT_MAX_DOWNLOAD_BYTES,
        relogin_budget: int = s.DEFAULT_RELOGIN_BUDGET,
        max_retry_after: float = s.DEFAULT_MAX_RETRY_AFTER,
        budget: RequestBudget | None = None,
        evidence: EvidenceLog | None = None,
    ) -> None:
        self._base = validate_base_url(base_url, allow_insecure_http)
        self._allow_insecure_http = allow_insecure_http
        self._allow_private_downloads = allow_private_downloads
        if password and not email:
            raise ConfigurationError("a password needs an email")
        if not password and not access_token:
            raise ConfigurationError("no credentials: set email and password, or access_token")
        if max_concurrency < 1 or max_attempts < 1 or request_timeout <= 0:
            raise ConfigurationError("max_concurrency, max_attempts and request_timeout must be positive")
        if requests_per_second is not None and requests_per_second <= 0:
            raise ConfigurationError("requests_per_second must be positive (or None)")
        if backoff_initial < 0 or backoff_max < backoff_initial:
            raise ConfigurationError("backoff needs 0 <= backoff_initial <= backoff_max")
        if max_retry_after < 0:
            raise ConfigurationError("max_retry_after must not be negative")
        if max_response_bytes < 1 or max_download_bytes < 1 or relogin_budget < 0:
            raise ConfigurationError("max_response_bytes and max_download_bytes must be positive, "
                                     "relogin_budget not negative")
        base = httpx.URL(self._base)
        self._origin = origin(base)
        self._prefix = path_of(base).rstrip("/")
        self._verify = tls_verify(ca_bundle, verify_tls)
        self._password = password
        self._access_token = access_token
        self._basic = None
        if email and password:
            pair = f"{email}:{password}".encode()
            self._basic = "Basic " + base64.b64encode(pair).decode("ascii")
        self._max_concurrency = max_concurrency
        self._budget = budget
        #: where the responses go, and answers an interrupted sync left (None: not kept)
        self.evidence = evidence
        self._timeout = request_timeout
        self._max_response_bytes, self._max_download_bytes = max_response_bytes, max_download_bytes
        self._transport = transport
        self._user_agent = user_agent
        self._headers = {"User-Agent": user_agent, s.ACCEPT_HEADER: "application/json"}
        self._extensions = {"timeout": httpx.Timeout(request_timeout).as_dict()}
        self._slots = PriorityGate(max_concurrency)
        #: requests sent whose answer has not arrived yet
        self._on_the_wire = 0
        self._http: httpx.AsyncClient | None = None
        self._sender: httpx.AsyncBaseTransport | None = None
        self._gc_tuned = False
        self.stats = RequestStats()
        self.throttle = AdaptiveThrottle(requests_per_second)
        self.retries = RetryPolicy(max_attempts=max_attempts, backoff_initial=backoff_initial,
                                   backoff_max=backoff_max, on_retry=self.stats.count_retry,
                                   secrets=self._secrets)
        self.tokens = TokenManager(
            login=self._fetch_login if self._basic else None,
            renew=self._fetch_renewal,
            access_token=access_token,
            store=token_store,
            renew_margin_seconds=renew_margin_seconds,
            on_event=self.stats.count_auth_event,
            relogin_budget=relogin_budget,
        )
        #: what a status or a transport failure makes of an attempt (see :mod:`.statuses`)
        self.status_rules = StatusRules(self._base, max_retry_after, self.stats, evidence,
                                        self._secrets)

    def __repr__(self) -> str:
        mode = "token-only" if self.tokens.token_only else "password"
        return f"ServiceClient({self._base!r}, {mode})"

    async def __aenter__(self) -> Self:
        """Open the connection pool; the start-up heap is frozen out of the GC's scans."""
        # One connection more than request slots: login and renewal bypass the slots
        # (module docstring, step 1), and must not make a request that holds a slot and
        # its token wait for a connection while that token is used up or revoked.
        connections = self._max_concurrency + 1
        limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
        self._sender = self._transport or AiohttpTransport(
            verify=self._verify, max_connections=connections, timeout=self._timeout)
        self._http = download_client(
            self._sender, verify=self._verify, timeout=self._timeout, limits=limits,
            user_agent=self._user_agent, allow_insecure_http=self._allow_insecure_http,
            allow_private=self._allow_private_downloads,
            allow_loopback=is_loopback(httpx.URL(self._base).host))
        if not self._gc_tuned:  # see :mod:`.heap`
            gc_tuning.enter()
            self._gc_tuned = True
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._gc_tuned:
            gc_tuning.exit()
            self._gc_tuned = False
        if self._budget is not None:
            await self._budget.aclose()
        if self._http is not None:
            await self._http.aclose()
            self._http = None
            self._sender = None

    def waiting_for(self) -> str:
        """What the client waits for now, in a few words (progress and stall messages)."""
        parts = []
        gate = self.throttle.gate_wait()
        if gate > 0:
            parts.append(f"rate-limited, retrying in {math.ceil(gate)} s")
        if self.tokens.renewing:
            parts.append("renewing token")
        if self._budget is not None and (budget := self._budget.waiting_for()):
            parts.append(budget)
        if self.retries.waiting:
            parts.append(f"{self.retries.waiting} request(s) waiting to retry "
                         f"(last: {self.retries.last_reason})")
        if self._on_the_wire:
            parts.append(f"{self._on_the_wire} response(s) awaited from the service")
        queued = self._slots.busy - self._on_the_wire - self.retries.waiting
        if queued > 0:
            parts.append(f"{queued} request(s) not yet sent (their turn of the rate limit)")
        return "; ".join(parts) or "nothing in flight"

    def queued(self) -> bool:
        """Whether requests wait for other processes of the account to give back their
        share of a shared budget (not a stall: the account is busy elsewhere)."""
        return self._budget is not None and self._budget.queued()

    # Endpoints -------------------------------------------------------------------------

    async def login(self) -> str:
        """Endpoint 1: log in with email and password now; the token becomes current."""
        return await self.tokens.login()

    async def renew_token(self) -> str:
        """Endpoint 2: renew the current token now (single-flight); returns the new one."""
        return await self.tokens.renew()

    async def user_info(self) -> UserInfo:
        """Endpoint 3: the user's roles; sent without ``x-namespace``."""
        return await self._get(s.USER_INFO_PATH, None, lambda r: UserInfo.model_validate(parse_json(r)))

    async def company(self, namespace: str, company_id: str) -> Company:
        """Endpoint 4: one company's details."""
        path = s.COMPANY_PATH.format(company_id=segment(company_id))
        return await self._get(path, namespace, lambda r: Company.model_validate(parse_json(r)), kept=True)

    async def connections(self, namespace: str) -> list[ConnectionEntry]:
        """Endpoint 5: every connection of the namespace (all pages)."""
        return await self._get_list(s.CONNECTIONS_PATH, namespace, ConnectionEntry)

    async def connection(self, namespace: str, company_id: str) -> ConnectionDetail:
        """Endpoint 6: one connection with its reading rights."""
        path = s.CONNECTION_PATH.format(company_id=segment(company_id))
        return await self._get(path, namespace, lambda r: ConnectionDetail.model_validate(parse_json(r)),
                               kept=True)

    async def questionnaire(self, namespace: str, company_id: str, company_type_id: str) -> Questionnaire:
        """Endpoint 7: a company's questionnaire for a company type, with answers."""
        path = s.QUESTIONNAIRE_PATH.format(company_id=segment(company_id),
                                           company_type_id=segment(company_type_id))
        return await self._get(path, namespace, lambda r: Questionnaire.from_body(parse_json(r)), kept=True)

    async def template(self, namespace: str, company_type_id: str) -> Questionnaire:
        """Endpoint 8: the questionnaire of a company type, without answers."""
        path = s.TEMPLATE_PATH.format(company_type_id=segment(company_type_id))
        return await self._get(path, namespace, lambda r: Questionnaire.from_body(parse_json(r)), kept=True)

    async def documents(self, namespace: str, company_id: str, company_type_id: str) -> list[Document]:
        """Endpoint 10: a company's documents under a company type (all pages)."""
        path = s.DOCUMENTS_PATH.format(company_id=segment(company_id),
                                       company_type_id=segment(company_type_id))
        return await self._get_list(path, namespace, Document, kept=True)

    async def document_url(self, namespace: str, document_id: str) -> DocumentUrl:
        """Endpoint 11: a temporary download URL of a document."""
        path = s.DOCUMENT_URL_PATH.format(document_id=segment(document_id))
        return await self._get(path, namespace, lambda r: DocumentUrl.model_validate(parse_json(r)),
                               keep=unsigned_url_answer)

    async def download(self, url: str, dest: pathlib.Path) -> DownloadResult:
        """Stream a signed document URL to `dest` (temp file, then rename).

        Sends no Authorization header (not to the service's origin either, so no redirect
        can carry one); follows redirects, each checked like the first URL: https (http
        only to loopback), and a public address unless `allow_private_downloads` (see
        :mod:`.addresses`); retried like any request. The rate limit applies only when
        the URL is on the service's own origin.
        """
        target = checked_download_url(url, self._allow_insecure_http)
        path = path_of(target)
        limited = origin(target) == self._origin
        dest = pathlib.Path(dest)
        return await self.retries.run(
            "GET", path, None, lambda attempt: download_once(self, target, path, dest, limited, attempt))

    def record_document_file(self, namespace: str, document_id: str, result: DownloadResult) -> None:
        """Record a downloaded document's file (its SHA-256 and size) in the evidence,
        beside the URL answer it came from (nothing without evidence)."""
        if self.evidence is not None:
            path = self._prefix + s.DOCUMENT_URL_PATH.format(document_id=segment(document_id))
            self.evidence.record_file(path, namespace, result.sha256, result.size)

    # For downloads (see :class:`~.downloads.DownloadingClient`) -------------------------

    @property
    def http(self) -> httpx.AsyncClient:
        """The client's :func:`~.downloads.download_client` (open inside ``async with``)."""
        if self._http is None:
            raise ConfigurationError("use the client inside 'async with ServiceClient(...)'")
        return self._http

    @property
    def max_download_bytes(self) -> int:
        """The size cap of a downloaded document (`max_download_bytes`)."""
        return self._max_download_bytes

    def slot(self) -> AbstractAsyncContextManager[None]:
        """Hold one of the `max_concurrency` request slots (``async with``), as a
        download does for its whole attempt."""
        return self._slots.slot()

    # Pipeline --------------------------------------------------------------------------

    def _url(self, path: str) -> httpx.URL:
        return httpx.URL(self._base + path)

    async def _get(self, path: str, namespace: str | None, parse: Callable[[httpx.Response], T],
                   *, kept: bool = False, keep: Callable[[bytes], bytes] | None = None) -> T:
        return await self._call("GET", self._url(path), self._prefix + path, namespace, _BEARER, parse,
                                kept=kept, keep=keep)

    async def _get_list(self, path: str, namespace: str, item_type: type[T], *, kept: bool = False) -> list[T]:
        items_adapter = adapter(list[item_type])  # type: ignore[valid-type]
        url = self._url(path)
        path = self._prefix + path
        seen: set[httpx.URL] = set()
        items: list[T] = []
        pages: list[Answer] = []
        for _ in range(s.MAX_PAGES):
            seen.add(url)
            page, next_link = await self._call(
                "GET", url, path, namespace, _BEARER, lambda r: parse_page(r, items_adapter), kept=kept)
            items.extend(page)
            if (answer := last_answer()) is not None:
                pages.append(Answer(answer.sha256s, (len(page),), answer.kept))
            if next_link is None:
                if pages:  # the response that carried each item
                    set_answer(Answer(tuple(a.sha256s[0] for a in pages),
                                      tuple(a.page_items[0] for a in pages), all(a.kept for a in pages)))
                return items
            url = self._resolve_next(url, path, next_link, namespace)
            path = path_of(url)
            if url in seen:
                raise ResponseFormatError("pagination loop: a next link repeats a page already read",
                                          method="GET", path=path, namespace=namespace)
        raise ResponseFormatError(f"more than {s.MAX_PAGES} pages", method="GET", path=path,
                                  namespace=namespace)

    async def _call(self, method: str, url: httpx.URL, path: str, namespace: str | None, auth: str,
                    parse: Callable[[httpx.Response], T], token: str | None = None, *,
                    kept: bool = False, keep: Callable[[bytes], bytes] | None = None) -> T:
        """One logical request: answered from an interrupted sync's evidence when `kept`
        allows and it has the answer, else sent (with retries); each answer used is
        kept as evidence (`keep`: what of its body), and :func:`~.evidence.last_answer`
        names it."""
        # login and token renewal (endpoints 1, 2) answer with a token: never evidence
        evidence = self.evidence if auth == _BEARER else None
        where = url.raw_path.decode("ascii")  # the manifest's key: path and query
        if evidence is not None:
            set_answer(None)
            if kept and (entry := evidence.lookup(method, where, namespace)) is not None:
                with contextlib.suppress(FileNotFoundError):  # the store lost it: ask again
                    return self._kept_answer(entry, evidence.body(entry), url, path, parse)

        async def once(attempt: int) -> T:
            if attempt > 1:
                self.stats.count(namespace, "retries")
            response = await self._attempt(method, url, path, namespace, auth, token, attempt)
            try:
                result = parse(response)
                if evidence is not None:
                    body = keep(response.content) if keep is not None else response.content
                    sha = evidence.record(method, where, namespace, response.status_code, body,
                                          response.headers.get("link"))
                    set_answer(Answer((sha,)))
                return result
            except Refused as exc:
                raise ResponseFormatError(str(exc), method=method, path=path, namespace=namespace,
                                          status_code=response.status_code) from None
            except (ValueError, TypeError, KeyError) as exc:
                # An HTML page may be a passing proxy error: retried, but named as such.
                if is_html(response):
                    error = self.status_rules.html_error(response, method, path, namespace)
                else:
                    error = ResponseFormatError(f"{type(exc).__name__}: {exc}", method=method,
                                                path=path, namespace=namespace,
                                                status_code=response.status_code,
                                                secrets=self._secrets())
                raise Retryable("ResponseFormatError", error.message,
                                 status_code=response.status_code, cause=error) from None

        return await self.retries.run(method, path, namespace, once)

    def _kept_answer(self, entry: Entry, body: bytes, url: httpx.URL, path: str,
                     parse: Callable[[httpx.Response], T]) -> T:
        """An answer an interrupted sync completed, parsed (or refused, 403/404) as the
        service's own, and recorded again in this sync's manifest."""
        assert self.evidence is not None
        headers = {"link": entry.note} if entry.note and entry.note != "file" else {}
        response = httpx.Response(entry.status, headers=headers, content=body,
                                  request=httpx.Request(entry.method, url))
        self.evidence.reuse(entry)
        self.stats.count(entry.namespace, "kept")
        set_answer(Answer((entry.sha256,), kept=True))
        if entry.status != 200:
            kind: type[ServiceError] = {403: DeniedError, 404: NotFoundError}[entry.status]
            raise self.status_rules.error(kind, response, entry.method, path, entry.namespace, "")
        return parse(response)

    async def _attempt(self, method: str, url: httpx.URL, path: str, namespace: str | None,
                       auth: str, token: str | None, attempt: int) -> httpx.Response:
        """One attempt, including the 401 handling of module docstring step 4."""
        headers = {s.NAMESPACE_HEADER: s.NAMESPACE_VALUE.format(company_id=header_id(namespace))} \
            if namespace is not None else {}
        if auth == _BASIC:
            headers[s.AUTHORIZATION_HEADER] = self._basic or ""
        elif auth == _GIVEN and token is not None:
            headers[s.AUTHORIZATION_HEADER] = f"Bearer {token}"
        # The slot is held across a 401 and its re-send: a request that met a revoked
        # token goes out again among the first with the new one, not behind every other.
        async with self._slots.slot() if auth == _BEARER else contextlib.nullcontext():
            return await self._send_until_authorized(
                method, url, path, namespace, auth, headers, attempt)

    async def _send_until_authorized(self, method: str, url: httpx.URL, path: str,
                                     namespace: str | None, auth: str, headers: dict[str, str],
                                     attempt: int) -> httpx.Response:
        unauthorized = never_accepted = 0
        while True:
            self.stats.count(namespace, "requests")
            response, sent_token = await self._send(method, url, path, headers, attempt,
                                                    bearer=auth == _BEARER)
            code = response.status_code
            if code == 429:
                self.stats.count(namespace, "throttled")
            if code == 401 and auth == _BEARER and sent_token is not None:
                # A token the service took before and now refuses was revoked (a token
                # storm): follow it. One it never took means logging in does not help.
                unauthorized += 1
                never_accepted += not self.tokens.was_accepted(sent_token)
                if never_accepted > s.MAX_RELOGINS_PER_REQUEST:
                    raise self.status_rules.error(
                        AuthenticationError, response, method, path, namespace,
                        f"still unauthorized (401) after logging in again {never_accepted - 1} times")
                if unauthorized > s.MAX_UNAUTHORIZED_PER_REQUEST:
                    raise self.status_rules.error(
                        AuthenticationError, response, method, path, namespace,
                        "the token kept being replaced while retrying")
                await self.tokens.recover(sent_token)
                continue
            if sent_token is not None:
                self.tokens.accepted(sent_token)
            if auth != _BEARER and code in (401, 403):
                what = "login" if auth == _BASIC else "token renewal"
                raise self.status_rules.error(AuthenticationError, response, method, path,
                                              namespace, f"{what} rejected; check the credentials")
            if code < 200 or code >= 300:
                self.status_rules.check(response, method, path, namespace)
            return response

    async def _send(self, method: str, url: httpx.URL, path: str, headers: dict[str, str],
                    attempt: int, *, bearer: bool) -> tuple[httpx.Response, str | None]:
        """Send one request and read its body; returns the response and its bearer token.

        The caller holds the concurrency slot of a bearer request (`_attempt`). A bearer
        request takes its token only once it has its turn of the rate limit and of the
        shared budget, right before it goes out: a token read earlier may have expired
        or been renewed while the request queued. Login and renewal
        requests (not `bearer`) don't queue for a slot, of this client or of the shared
        budget, since the requests holding the slots may be waiting for exactly that
        renewal. `request_timeout` bounds the whole attempt,
        from sending to the last byte of the body.
        """
        sender = self._sender
        if sender is None:
            raise ConfigurationError("use the client inside 'async with ServiceClient(...)'")
        sent_token: str | None = None
        await self.throttle.wait_turn()
        async with self._budget.request(slot=bearer) if self._budget else contextlib.nullcontext():
            if bearer:
                sent_token = await self.tokens.get()
                headers = {**headers, s.AUTHORIZATION_HEADER: f"Bearer {sent_token}"}
            request = httpx.Request(method, url, headers={**self._headers, **headers},
                                    extensions=self._extensions)
            sent_at = self.throttle.now()
            self.stats.requests_sent += 1
            self._on_the_wire += 1
            try:
                async with asyncio.timeout(self._timeout):
                    response = await sender.handle_async_request(request)
                    response = await read_body(response, request, self._max_response_bytes)
            except TRANSPORT_ERRORS as exc:
                self.status_rules.transport_failed(method, path, attempt, exc, url)
            except TimeoutError:
                self.status_rules.transport_failed(method, path, attempt, httpx.ReadTimeout(
                    f"no complete answer within request_timeout ({self._timeout:g} s)"), url)
            finally:
                self._on_the_wire -= 1
        if response.status_code == 429:
            self.throttle.record(429, sent_at, self.status_rules.honoured_retry_after(response))
        else:
            self.throttle.record(response.status_code, sent_at, None)
        self.stats.count_response(method, path, attempt, response.status_code, len(response.content))
        return response, sent_token

    def _resolve_next(self, current: httpx.URL, path: str, link: str,
                      namespace: str | None) -> httpx.URL:
        target = current.join(link)
        if origin(target) != self._origin:
            raise ResponseFormatError("a pagination link leaves the service's origin; not followed",
                                      method="GET", path=path, namespace=namespace)
        return target

    def _secrets(self) -> list[str | None]:
        encoded = self._basic.split(" ", 1)[1] if self._basic else None
        return [self._password, self._access_token, encoded, *self.tokens.known]

    async def _fetch_login(self) -> str:
        return await self._call("POST", self._url(s.LOGIN_PATH), self._prefix + s.LOGIN_PATH, None,
                                _BASIC, parse_token)

    async def _fetch_renewal(self, token: str) -> str:
        return await self._call("GET", self._url(s.RENEW_TOKEN_PATH),
                                self._prefix + s.RENEW_TOKEN_PATH, None, _GIVEN, parse_token,
                                token=token)
