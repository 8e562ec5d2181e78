"""Baseline (b): dlt's declarative ``rest_api`` source, configured for the same endpoints.

What it uses, all documented rest_api options:

* ``client``: ``base_url``, bearer ``auth`` (the token comes from one login request
  first: the service's login is a Basic-auth POST that returns a JWT, which none of
  rest_api's auth classes performs), and the ``x-namespace`` header. One client
  configuration per namespace, so one set of resources per namespace, all in one
  source (they extract side by side).
* parent/child resources with ``{resources.<parent>.<field>}`` path parameters,
  ``include_from_parent``, ``parallelized: True`` on every child resource,
  ``response_actions`` ignoring 403/404 (a ghost connection's detail answers 404),
  ``paginator: header_link`` on the two list endpoints (our client follows Link
  headers too), ``data_selector``, ``table_name``, and ``processing_steps`` (``map``)
  to add ``namespace_company_id``.
* its own retries (dlt's ``requests`` client: 429/5xx/connection errors, with
  backoff) and its default nested normalisation (forms -> child tables).
* dlt's thread pool for parallelized resources, with ``extract.workers`` set to
  our ``max_concurrency`` so both run with the same number of requests in flight
  (dlt's default is 5 workers).

What rest_api cannot express, and the closest faithful configuration used:

* Questionnaires and documents are read per (connection, *received type*); the
  received types are a list inside the connection detail, and a rest_api child
  resolves one request per parent *record*, not per element of a list in it. So a
  plain dlt transformer (``received_pairs``) explodes each connection detail into
  (company_id, company_type_id) records and is listed among the rest_api resources
  as the parent of the questionnaire and document resources (rest_api accepts dlt
  resources in its ``resources`` list).
* The namespace's own (company, internal type) pairs come from user-info, which is
  read once before the source is built (as our sync does); a plain resource
  (``own_pairs``) yields them.
* Templates are read once per distinct type: two more small plain resources
  (``own_types``, and ``received_types``, which drops types already seen).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import counts
from .harness import EMAIL, PASSWORD

DATASET = "rest_api"
RELATIONS = {
    "connections": f"{DATASET}.connections",
    "questionnaires": f"{DATASET}.questionnaires",
    "documents": f"{DATASET}.documents",
}
IGNORE_DENIED = [{"status_code": 404, "action": "ignore"}, {"status_code": 403, "action": "ignore"}]


def _tag(ns: str, parent: str | None = None, fields: tuple[str, ...] = ()) -> Any:
    """A ``map`` step: add the namespace, and drop rest_api's ``_<parent>_`` prefix."""

    def step(record: dict[str, Any]) -> dict[str, Any]:
        record["namespace_company_id"] = ns
        for name in fields:
            record[name] = record.pop(f"_{parent}_{name}", None)
        return record

    return step


def namespace_resources(base_url: str, token: str, index: int, role: dict[str, Any]) -> list[Any]:
    """Every resource of one namespace."""
    import dlt
    from dlt.sources.rest_api import rest_api_resources

    ns = role["companyId"]
    own_types = list(dict.fromkeys(role.get("internal", {}).get("companyTypeIds", [])))
    client = {
        "base_url": base_url.rstrip("/") + "/api/",
        "auth": {"type": "bearer", "token": token},
        "headers": {"x-namespace": f"/api/company/{ns}"},
        "paginator": "single_page",
    }
    n = f"_{index}"
    first = {
        "client": client,
        "resources": [
            {
                "name": "own_company" + n, "table_name": "companies",
                "endpoint": {"path": f"companies/{ns}", "data_selector": "$"},
                "processing_steps": [{"map": _tag(ns)}],
            },
            {
                "name": "connections" + n, "table_name": "connections",
                "endpoint": {"path": "companies/connections", "data_selector": "$",
                             "paginator": "header_link"},
                "processing_steps": [{"map": _tag(ns)}],
            },
            {
                "name": "connection_companies" + n, "table_name": "companies",
                "parallelized": True,
                "endpoint": {"path": f"companies/{{resources.connections{n}.id}}",
                             "data_selector": "$", "response_actions": IGNORE_DENIED},
                "processing_steps": [{"map": _tag(ns)}],
            },
            {
                "name": "connection_details" + n, "table_name": "connection_details",
                "parallelized": True,
                "endpoint": {"path": f"companies/connections/{{resources.connections{n}.id}}",
                             "data_selector": "$", "response_actions": IGNORE_DENIED},
                "processing_steps": [{"map": _tag(ns)}],
            },
        ],
    }
    stage_one = {r.name: r for r in rest_api_resources(first)}  # type: ignore[arg-type]
    seen_types = set(own_types)

    @dlt.resource(name="own_pairs" + n, selected=False)
    def own_pairs() -> Iterator[list[dict[str, str]]]:
        yield [{"company_id": ns, "company_type_id": t} for t in own_types]

    @dlt.transformer(name="received_pairs" + n, data_from=stage_one["connection_details" + n],
                     selected=False)
    def received_pairs(detail: Any) -> Iterator[list[dict[str, str]]]:
        for record in detail if isinstance(detail, list) else [detail]:
            received = (record.get("readingRights") or {}).get("received") or {}
            types = list(dict.fromkeys(received.get("companyTypeIds") or []))
            if types:
                yield [{"company_id": record["id"], "company_type_id": t} for t in types]

    @dlt.resource(name="own_types" + n, selected=False)
    def own_type_rows() -> Iterator[list[dict[str, str]]]:
        yield [{"company_type_id": t} for t in own_types]

    @dlt.transformer(name="received_types" + n, data_from=received_pairs, selected=False)
    def received_types(pairs: list[dict[str, str]]) -> Iterator[list[dict[str, str]]]:
        new = []
        for pair in pairs:
            if pair["company_type_id"] not in seen_types:
                seen_types.add(pair["company_type_id"])
                new.append({"company_type_id": pair["company_type_id"]})
        if new:
            yield new

    children: list[Any] = [own_pairs, received_pairs, own_type_rows, received_types]
    for parent in ("own_pairs" + n, "received_pairs" + n):
        p = f"resources.{parent}"
        children += [
            {
                "name": f"{parent}_questionnaires", "table_name": "questionnaires",
                "parallelized": True, "include_from_parent": ["company_id", "company_type_id"],
                "endpoint": {"path": f"companies/{{{p}.company_id}}/type/{{{p}.company_type_id}}"
                                     "/questionnaires",
                             "data_selector": "questionnaires", "response_actions": IGNORE_DENIED},
                "processing_steps": [{"map": _tag(ns, parent, ("company_id", "company_type_id"))}],
            },
            {
                "name": f"{parent}_documents", "table_name": "documents",
                "parallelized": True, "include_from_parent": ["company_id", "company_type_id"],
                "endpoint": {"path": f"companies/{{{p}.company_id}}/company-types/"
                                     f"{{{p}.company_type_id}}/documents",
                             "data_selector": "$", "paginator": "header_link",
                             "response_actions": IGNORE_DENIED},
                "processing_steps": [{"map": _tag(ns, parent, ("company_id", "company_type_id"))}],
            },
        ]
    for parent in ("own_types" + n, "received_types" + n):
        children.append({
            "name": f"{parent}_templates", "table_name": "questionnaire_templates",
            "parallelized": True, "include_from_parent": ["company_type_id"],
            "endpoint": {"path": f"company-type/{{resources.{parent}.company_type_id}}/questionnaires",
                         "data_selector": "questionnaires", "response_actions": IGNORE_DENIED},
            "processing_steps": [{"map": _tag(ns, parent, ("company_type_id",))}],
        })
    stage_two = rest_api_resources({"client": client, "resources": children})  # type: ignore[typeddict-item]
    return list(stage_one.values()) + [r for r in stage_two if r.selected]


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Job ``rest_api``: keys base_url, warehouse, workers, optional namespaces."""
    os.environ["EXTRACT__WORKERS"] = str(job.get("workers", 16))
    import dlt
    from dlt.sources.helpers import requests

    warehouse = Path(job["warehouse"])
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    base_url = job["base_url"]
    started = time.perf_counter()
    token = requests.post(f"{base_url}/api/auth", auth=(EMAIL, PASSWORD)).json()["token"]
    roles = requests.get(f"{base_url}/api/auth/user-info",
                         headers={"Authorization": f"Bearer {token}"}).json()["roles"]
    wanted = job.get("namespaces")
    roles = [r for r in roles if not wanted or r["companyId"] in wanted]

    @dlt.source(name="company_connections_rest_api")
    def source() -> list[Any]:
        return [r for i, role in enumerate(roles) for r in namespace_resources(base_url, token, i, role)]

    pipeline = dlt.pipeline(
        pipeline_name="rest_api_baseline",
        destination=dlt.destinations.duckdb(str(warehouse)),
        dataset_name=DATASET,
        pipelines_dir=str(warehouse.parent / ".dlt-pipelines" / warehouse.stem),
    )
    pipeline.run(source())
    finished = time.perf_counter()
    timings = {"sync": finished - started}
    trace = pipeline.last_trace
    for step in trace.steps if trace else []:
        if step.step in ("extract", "normalize", "load") and step.started_at and step.finished_at:
            timings[f"dlt_{step.step}"] = (step.finished_at - step.started_at).total_seconds()
    return {
        "timings": timings,
        "requests": None,  # counted by the sandbox
        "failed": [],
        "counts": counts.per_namespace(warehouse, RELATIONS),
        "tables": len(pipeline.default_schema.data_table_names()),
    }
