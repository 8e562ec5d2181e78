"""Hand-built raw layers for the model tests: the dlt `raw` tables, created by hand.

The shape is the raw layer of the sync engine (see docs/analysts.md, "The raw layer"): `companies`,
`connections`, `questionnaires` and `documents` are dlt scd2 tables (`_dlt_valid_from` =
synced_at of the run that first loaded a version, `_dlt_valid_to` = synced_at of the run
that retired it, NULL while current); `sync_runs` has one row per (sync, namespace) with
the run's `synced_at`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

SYNCED_AT = datetime(2026, 1, 10, 6, 0, tzinfo=UTC)
# "now" of most model builds in the tests
AS_OF = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

RAW_TABLES: dict[str, str] = {
    "user_roles": """
        namespace_company_id VARCHAR, internal_names JSON, internal_company_type_ids JSON,
        external_names JSON, external_company_type_ids JSON, synced_at TIMESTAMPTZ""",
    "companies": """
        namespace_company_id VARCHAR, company_id VARCHAR, name VARCHAR, country VARCHAR,
        city VARCHAR, lei VARCHAR, cin VARCHAR, is_namespace_company BOOLEAN,
        content_hash VARCHAR, synced_at TIMESTAMPTZ, _dlt_valid_from TIMESTAMPTZ,
        _dlt_valid_to TIMESTAMPTZ""",
    "connections": """
        namespace_company_id VARCHAR, company_id VARCHAR, name VARCHAR, country VARCHAR,
        given_company_type_ids JSON, received_company_type_ids JSON, has_detail BOOLEAN,
        content_hash VARCHAR, synced_at TIMESTAMPTZ, _dlt_valid_from TIMESTAMPTZ,
        _dlt_valid_to TIMESTAMPTZ""",
    "questionnaire_templates": """
        namespace_company_id VARCHAR, company_type_id VARCHAR, forms_json VARCHAR,
        synced_at TIMESTAMPTZ""",
    "questionnaires": """
        namespace_company_id VARCHAR, company_id VARCHAR, company_type_id VARCHAR,
        forms_json VARCHAR, content_hash VARCHAR, synced_at TIMESTAMPTZ,
        _dlt_valid_from TIMESTAMPTZ, _dlt_valid_to TIMESTAMPTZ""",
    "documents": """
        namespace_company_id VARCHAR, company_id VARCHAR, company_type_id VARCHAR,
        document_id VARCHAR, name VARCHAR, category VARCHAR, type VARCHAR,
        issue_date VARCHAR, expiration_date VARCHAR, document_json VARCHAR,
        content_hash VARCHAR, synced_at TIMESTAMPTZ, _dlt_valid_from TIMESTAMPTZ,
        _dlt_valid_to TIMESTAMPTZ""",
    "service_keys": """
        namespace_company_id VARCHAR, endpoint VARCHAR, key_path VARCHAR, is_modelled BOOLEAN,
        content_hash VARCHAR, synced_at TIMESTAMPTZ, response_sha256 VARCHAR,
        _dlt_valid_from TIMESTAMPTZ, _dlt_valid_to TIMESTAMPTZ""",
    "sync_issues": """
        sync_id VARCHAR, namespace_company_id VARCHAR, endpoint VARCHAR, company_id VARCHAR,
        company_type_id VARCHAR, http_status BIGINT, message VARCHAR, synced_at TIMESTAMPTZ""",
    "sync_runs": """
        sync_id VARCHAR, namespace_company_id VARCHAR, started_at TIMESTAMPTZ,
        finished_at TIMESTAMPTZ, status VARCHAR, requests BIGINT, rows_loaded BIGINT,
        issues BIGINT, error VARCHAR, synced_at TIMESTAMPTZ""",
}


def create_raw(path: Path, tables: Iterable[str] | None = None) -> Path:
    """Create the raw schema with the given tables (default: all), dlt columns included."""
    with duckdb.connect(str(path)) as con:
        con.execute("create schema if not exists raw")
        for table in tables if tables is not None else RAW_TABLES:
            con.execute(
                f"create table raw.{table} ({RAW_TABLES[table]}, "
                "_dlt_load_id VARCHAR, _dlt_id VARCHAR)"
            )
    return path


def insert(path: Path, table: str, rows: Iterable[Mapping[str, Any]]) -> None:
    """Insert rows (dicts of column -> value); dict/list values are stored as JSON text."""
    rows = list(rows)
    if not rows:
        return
    with duckdb.connect(str(path)) as con:
        for row in rows:
            row = {"_dlt_id": uuid.uuid4().hex, **row}
            names = list(row)
            values = [json.dumps(v) if isinstance(v, (dict, list)) else v for v in row.values()]
            con.execute(
                f"insert into raw.{table} ({', '.join(names)}) "
                f"values ({', '.join('?' for _ in names)})",
                values,
            )


def company(
    ns: str,
    company_id: str,
    name: str,
    valid_from: datetime = SYNCED_AT,
    valid_to: datetime | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "namespace_company_id": ns,
        "company_id": company_id,
        "name": name,
        "country": extra.get("country", "NO"),
        "city": extra.get("city", "Oslo"),
        "lei": extra.get("lei"),
        "cin": extra.get("cin"),
        "is_namespace_company": ns == company_id,
        "content_hash": f"h-{ns}-{company_id}-{name}-{extra.get('lei')}",
        "synced_at": valid_from,
        "_dlt_valid_from": valid_from,
        "_dlt_valid_to": valid_to,
    }


def service_key(ns: str, endpoint: str, key_path: str, *, modelled: bool = True,
                valid_from: datetime = SYNCED_AT, valid_to: datetime | None = None) -> dict[str, Any]:
    return {
        "namespace_company_id": ns,
        "endpoint": endpoint,
        "key_path": key_path,
        "is_modelled": modelled,
        "content_hash": f"k-{ns}-{endpoint}-{key_path}-{modelled}",
        "synced_at": valid_from,
        "_dlt_valid_from": valid_from,
        "_dlt_valid_to": valid_to,
    }


def connection(
    ns: str,
    company_id: str,
    name: str,
    given: list[str] | None = None,
    received: list[str] | None = None,
    has_detail: bool = True,
    valid_from: datetime = SYNCED_AT,
    valid_to: datetime | None = None,
) -> dict[str, Any]:
    return {
        "namespace_company_id": ns,
        "company_id": company_id,
        "name": name,
        "country": "NO" if has_detail else None,
        "given_company_type_ids": given or [],
        "received_company_type_ids": received or [],
        "has_detail": has_detail,
        "content_hash": f"h-{ns}-{company_id}-{name}-{given}-{received}-{has_detail}",
        "synced_at": valid_from,
        "_dlt_valid_from": valid_from,
        "_dlt_valid_to": valid_to,
    }


def questionnaire(
    ns: str,
    company_id: str,
    company_type_id: str,
    forms: list[dict[str, Any]] | str,
    valid_from: datetime = SYNCED_AT,
    valid_to: datetime | None = None,
) -> dict[str, Any]:
    return {
        "namespace_company_id": ns,
        "company_id": company_id,
        "company_type_id": company_type_id,
        "forms_json": forms if isinstance(forms, str) else json.dumps(forms),
        "content_hash": f"h-{valid_from.isoformat()}",
        "synced_at": valid_from,
        "_dlt_valid_from": valid_from,
        "_dlt_valid_to": valid_to,
    }


def document(
    ns: str,
    company_id: str,
    company_type_id: str,
    document_id: str,
    expiration_date: str | None,
    issue_date: str | None = "2025-01-01T00:00:00",
    valid_to: datetime | None = None,
    valid_from: datetime = SYNCED_AT,
    name: str | None = None,
) -> dict[str, Any]:
    return {
        "namespace_company_id": ns,
        "company_id": company_id,
        "company_type_id": company_type_id,
        "document_id": document_id,
        "name": name or f"{document_id}.pdf",
        "category": "Legal",
        "type": "Certificate",
        "issue_date": issue_date,
        "expiration_date": expiration_date,
        "document_json": json.dumps({"id": document_id}),
        "content_hash": f"h-{document_id}-{name}-{expiration_date}",
        "synced_at": valid_from,
        "_dlt_valid_from": valid_from,
        "_dlt_valid_to": valid_to,
    }


def form(form_id: str, label: str, *fields: dict[str, Any]) -> dict[str, Any]:
    return {"id": form_id, "label": label, "fields": list(fields)}


def field(
    field_id: str,
    field_type: str,
    label: str,
    information: Any = None,
    options: list[dict[str, str]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    result: dict[str, Any] = {"id": field_id, "type": field_type, "label": label, **extra}
    if options is not None:
        result["options"] = options
    if information is not None:
        result["information"] = information
    return result


def options(*values: str) -> list[dict[str, str]]:
    """Options o1, o2, ... with the given values."""
    return [{"id": f"o{i}", "value": v} for i, v in enumerate(values, start=1)]


def sync_run(
    sync_id: str, ns: str, synced_at: datetime, status: str = "success", error: str | None = None
) -> dict[str, Any]:
    """One row of raw.sync_runs: namespace `ns` of the sync `sync_id` at `synced_at`."""
    return {
        "sync_id": sync_id,
        "namespace_company_id": ns,
        "started_at": synced_at,
        "finished_at": synced_at,
        "status": status,
        "requests": 10,
        "rows_loaded": 10,
        "issues": 0,
        "error": error,
        "synced_at": synced_at,
    }
