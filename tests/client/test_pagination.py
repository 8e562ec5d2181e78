"""List endpoints follow pagination instead of truncating, and refuse loops."""

from __future__ import annotations

import httpx
import pytest

from pipelines.company_connections.errors import RequestFailedError, ResponseFormatError

from .fakes import BASE_URL, FakeService

pytestmark = pytest.mark.anyio

NS = "ns-1"
CONNECTIONS = "/api/companies/connections"
DOCUMENTS = "/api/companies/c-1/company-types/t-1/documents"


def _paged(pages: dict[str | None, httpx.Response]):
    def handler(request: httpx.Request) -> httpx.Response:
        return pages[request.url.query.decode() or None]
    return handler


async def test_link_header_pagination() -> None:
    service = FakeService()
    service.route("GET", CONNECTIONS, _paged({
        None: httpx.Response(200, json=[{"id": "a"}, {"id": "b"}],
                             headers={"Link": f'<{CONNECTIONS}?page=2>; rel="next"'}),
        "page=2": httpx.Response(200, json=[{"id": "c"}], headers={
            "Link": f'<{BASE_URL}{CONNECTIONS}?page=3>; rel="next", <{CONNECTIONS}>; rel="first"'}),
        "page=3": httpx.Response(200, json=[{"id": "d"}]),
    }))
    async with service.client() as client:
        entries = await client.connections(NS)
    assert [e.id for e in entries] == ["a", "b", "c", "d"]
    assert all(r.headers["x-namespace"] == f"/api/company/{NS}"
               for r in service.calls(CONNECTIONS))


@pytest.mark.parametrize("key", ["items", "data", "results"])
@pytest.mark.parametrize("next_key", ["next", "nextPage", "links.next", "links.next.href"])
async def test_object_body_pagination(key: str, next_key: str) -> None:
    def page(items: list[dict], link: str | None) -> httpx.Response:
        body: dict = {key: items, "total": 3}
        if next_key == "links.next":
            body["links"] = {"next": link}
        elif next_key == "links.next.href":
            body["links"] = {"next": {"href": link} if link else None}
        else:
            body[next_key] = link
        return httpx.Response(200, json=body)

    service = FakeService()
    service.route("GET", DOCUMENTS, _paged({
        None: page([{"id": "d1", "name": "a.pdf"}], f"{DOCUMENTS}?cursor=x"),
        "cursor=x": page([{"id": "d2"}, {"id": "d3"}], None),
    }))
    async with service.client() as client:
        documents = await client.documents(NS, "c-1", "t-1")
    assert [d.id for d in documents] == ["d1", "d2", "d3"]


async def test_pagination_loop_is_an_error() -> None:
    service = FakeService()
    service.route("GET", CONNECTIONS, _paged({
        None: httpx.Response(200, json={"items": [{"id": "a"}], "next": f"{CONNECTIONS}?p=2"}),
        "p=2": httpx.Response(200, json={"items": [{"id": "b"}], "next": f"{CONNECTIONS}"}),
    }))
    async with service.client() as client:
        with pytest.raises(ResponseFormatError, match="pagination loop") as info:
            await client.connections(NS)
    assert info.value.namespace == NS


async def test_page_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from pipelines.company_connections import settings

    monkeypatch.setattr(settings, "MAX_PAGES", 3)
    service = FakeService()

    def endless(request: httpx.Request) -> httpx.Response:
        n = int(request.url.params.get("p", "0"))
        return httpx.Response(200, json=[{"id": str(n)}],
                              headers={"Link": f'<{CONNECTIONS}?p={n + 1}>; rel="next"'})

    service.route("GET", CONNECTIONS, endless)
    async with service.client() as client:
        with pytest.raises(ResponseFormatError, match="more than 3 pages"):
            await client.connections(NS)


async def test_next_link_to_another_host_is_refused() -> None:
    service = FakeService()
    service.route("GET", CONNECTIONS, json=[{"id": "a"}],
                  headers={"Link": '<https://elsewhere.test/steal>; rel="next"'})
    async with service.client() as client:
        with pytest.raises(ResponseFormatError, match="leaves the service's origin"):
            await client.connections(NS)
    assert all(r.url.host == "service.test" for r in service.requests)


async def test_object_without_items_is_malformed() -> None:
    service = FakeService()
    service.route("GET", CONNECTIONS, json={"unexpected": True})
    async with service.client(max_attempts=2) as client:
        with pytest.raises(RequestFailedError) as info:
            await client.connections(NS)
    assert info.value.last_error == "ResponseFormatError"
