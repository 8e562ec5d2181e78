"""The ceiling: a bare concurrent fetch of the URLs a sync reads, with no processing.

Same requests as one sync (login, user-info, and per namespace: own company,
connections list, company and detail per connection, questionnaire and documents
per readable pair, template per type; taken from the sandbox's ground truth),
same concurrency, with a valid token and the ``x-namespace`` header. Bodies are read
and dropped. Unlike a sync, the ceiling knows every URL in advance, so it never waits
for a parent response. Two clients: one pooled ``httpx.AsyncClient`` with that many
requests in flight (:func:`fetch_all`), or that many threads sharing one pooled
``httpx.Client`` (:func:`fetch_threads`), the plain script a user would write.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import httpx

from .harness import EMAIL, PASSWORD

Item = tuple[str, str | None]  # (path, namespace or None)


def _q(value: str) -> str:
    return quote(value, safe="")


def sync_urls(truth: dict[str, Any], namespaces: list[str] | None = None) -> list[Item]:
    """Every GET of one sync of `namespaces` (default all), in a sync's order."""
    items: list[Item] = [("/api/auth/user-info", None)]
    for ns in namespaces or truth["namespaces"]:
        t = truth["per_namespace"][ns]
        items.append((f"/api/companies/{_q(ns)}", ns))
        items.append(("/api/companies/connections", ns))
        for company_id in t["connection_ids"]:
            items.append((f"/api/companies/{_q(company_id)}", ns))
            items.append((f"/api/companies/connections/{_q(company_id)}", ns))
        for company_id, type_id in t["questionnaires"]:
            items.append((f"/api/companies/{_q(company_id)}/type/{_q(type_id)}/questionnaires", ns))
            items.append(
                (f"/api/companies/{_q(company_id)}/company-types/{_q(type_id)}/documents", ns))
        for type_id in t["template_type_ids"]:
            items.append((f"/api/company-type/{_q(type_id)}/questionnaires", ns))
    return items


async def fetch_all(base_url: str, items: list[Item], concurrency: int) -> dict[str, Any]:
    """Log in, then GET every item with `concurrency` requests in flight."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    statuses: Counter[int] = Counter()
    received = 0
    started = time.perf_counter()
    cpu_started = time.process_time()
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=30) as client:
        login = await client.post("/api/auth", auth=(EMAIL, PASSWORD))
        login.raise_for_status()
        bearer = f"Bearer {login.json()['token']}"
        headers: dict[str | None, dict[str, str]] = {None: {"Authorization": bearer}}
        for _, ns in items:
            if ns not in headers:
                headers[ns] = {"Authorization": bearer, "x-namespace": f"/api/company/{ns}"}
        queue = iter(items)

        async def worker() -> None:
            nonlocal received
            for path, ns in queue:
                response = await client.get(path, headers=headers[ns])
                statuses[response.status_code] += 1
                received += len(response.content)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    seconds = time.perf_counter() - started
    return {
        "timings": {"fetch": seconds, "cpu_fetch": time.process_time() - cpu_started},
        "requests": len(items),  # as a sync counts them: login excluded
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "bytes": received,
    }


def fetch_threads(base_url: str, items: list[Item], concurrency: int) -> dict[str, Any]:
    """Log in, then GET every item from `concurrency` threads sharing one pooled client."""
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    statuses: Counter[int] = Counter()
    received = 0
    started = time.perf_counter()
    cpu_started = time.process_time()
    with httpx.Client(base_url=base_url, limits=limits, timeout=30) as client:
        login = client.post("/api/auth", auth=(EMAIL, PASSWORD))
        login.raise_for_status()
        bearer = f"Bearer {login.json()['token']}"
        headers: dict[str | None, dict[str, str]] = {None: {"Authorization": bearer}}
        for _, ns in items:
            if ns not in headers:
                headers[ns] = {"Authorization": bearer, "x-namespace": f"/api/company/{ns}"}

        def get(item: Item) -> tuple[int, int]:
            path, ns = item
            response = client.get(path, headers=headers[ns])
            return response.status_code, len(response.content)

        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            for status, size in pool.map(get, items):
                statuses[status] += 1
                received += size
    seconds = time.perf_counter() - started
    return {
        "timings": {"fetch": seconds, "cpu_fetch": time.process_time() - cpu_started},
        "requests": len(items),  # as a sync counts them: login excluded
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "bytes": received,
    }


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Job ``ceiling``: keys base_url, concurrency, optional namespaces, optional client
    ("async", the default, or "threads": :func:`fetch_threads`), and for the async client
    an optional loop ("asyncio", the default, as our sync uses; or "uvloop")."""
    with httpx.Client(base_url=job["base_url"], timeout=120) as client:
        truth = client.get("/_sandbox/truth").json()
    items = sync_urls(truth, job.get("namespaces"))
    if job.get("client") == "threads":
        return fetch_threads(job["base_url"], items, int(job.get("concurrency", 16)))
    factory = None
    if job.get("loop") == "uvloop":
        import uvloop

        factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(fetch_all(job["base_url"], items, int(job.get("concurrency", 16))))
