"""Baseline (a): the script a user would hand-write. Sequential, then dlt defaults.

One ``httpx.Client``, one request at a time: log in, user-info, then per namespace
its own company, the connections list, per connection its company and its
connection detail, per readable (company, type) pair the questionnaire and the
documents, and one template per company type: the same endpoints as our sync.
403 and 404 are skipped (as our sync records them as issues); other errors raise.

The rows are loaded with plain ``pipeline.run(rows, table_name=...)``, one call
per table, with dlt's default nested normalisation: a questionnaire's ``forms``
become child tables (``questionnaires__forms``, ``..__fields``, ``..__options``...).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from . import counts
from .harness import EMAIL, PASSWORD

DATASET = "naive"
RELATIONS = {
    "connections": f"{DATASET}.connections",
    "questionnaires": f"{DATASET}.questionnaires",
    "documents": f"{DATASET}.documents",
}


def _q(value: str) -> str:
    return quote(value, safe="")


def fetch(base_url: str, namespaces: list[str] | None = None) -> tuple[dict[str, list[dict[str, Any]]], int]:
    """Every row of every namespace, and the number of GET requests made."""
    tables: dict[str, list[dict[str, Any]]] = {
        "companies": [], "connections": [], "questionnaires": [], "documents": [],
        "questionnaire_templates": [],
    }
    requests = 0
    with httpx.Client(base_url=base_url, timeout=30) as client:
        token = client.post("/api/auth", auth=(EMAIL, PASSWORD)).raise_for_status().json()["token"]
        client.headers["Authorization"] = f"Bearer {token}"

        def get(path: str, ns: str | None) -> Any:
            nonlocal requests
            requests += 1
            headers = {"x-namespace": f"/api/company/{ns}"} if ns else None
            response = client.get(path, headers=headers)
            if response.status_code in (403, 404):
                return None
            return response.raise_for_status().json()

        roles = get("/api/auth/user-info", None)["roles"]
        for role in roles:
            ns = role["companyId"]
            if namespaces and ns not in namespaces:
                continue
            own = get(f"/api/companies/{_q(ns)}", ns)
            if own is not None:
                tables["companies"].append({"namespace_company_id": ns, **own})
            pairs = [(ns, t) for t in role.get("internal", {}).get("companyTypeIds", [])]
            for entry in get("/api/companies/connections", ns):
                company = get(f"/api/companies/{_q(entry['id'])}", ns)
                if company is not None:
                    tables["companies"].append({"namespace_company_id": ns, **company})
                detail = get(f"/api/companies/connections/{_q(entry['id'])}", ns)
                tables["connections"].append({"namespace_company_id": ns, **(detail or entry)})
                if detail is not None:
                    received = detail["readingRights"]["received"]["companyTypeIds"]
                    pairs += [(entry["id"], t) for t in received]
            types: list[str] = []
            for company_id, type_id in pairs:
                if type_id not in types:
                    types.append(type_id)
                body = get(f"/api/companies/{_q(company_id)}/type/{_q(type_id)}/questionnaires", ns)
                if body is not None:
                    tables["questionnaires"].append({
                        "namespace_company_id": ns, "company_id": company_id,
                        "company_type_id": type_id, **body["questionnaires"]})
                documents = get(
                    f"/api/companies/{_q(company_id)}/company-types/{_q(type_id)}/documents", ns)
                for document in documents or []:
                    tables["documents"].append({
                        "namespace_company_id": ns, "company_id": company_id,
                        "company_type_id": type_id, **document})
            for type_id in types:
                body = get(f"/api/company-type/{_q(type_id)}/questionnaires", ns)
                if body is not None:
                    tables["questionnaire_templates"].append({
                        "namespace_company_id": ns, "company_type_id": type_id,
                        **body["questionnaires"]})
    return tables, requests


def run(job: dict[str, Any]) -> dict[str, Any]:
    """Job ``naive``: keys base_url, warehouse, optional namespaces."""
    import dlt

    warehouse = Path(job["warehouse"])
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    tables, requests = fetch(job["base_url"], job.get("namespaces"))
    fetched = time.perf_counter()
    pipeline = dlt.pipeline(
        pipeline_name="naive_baseline",
        destination=dlt.destinations.duckdb(str(warehouse)),
        dataset_name=DATASET,
        pipelines_dir=str(warehouse.parent / ".dlt-pipelines" / warehouse.stem),
    )
    for name, rows in tables.items():
        if rows:
            pipeline.run(rows, table_name=name)
    finished = time.perf_counter()
    return {
        "timings": {"fetch": fetched - started, "dlt_run": finished - fetched,
                    "sync": finished - started},
        "requests": requests,
        "rows": sum(len(rows) for rows in tables.values()),
        "failed": [],
        "counts": counts.per_namespace(warehouse, RELATIONS),
        "tables": len(pipeline.default_schema.data_table_names()),
    }
