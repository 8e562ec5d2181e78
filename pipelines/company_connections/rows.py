"""From an answer of the service to the rows of the raw tables: one function per table.

The sync (:mod:`.extract`) builds every row of service data here, and ``diligence
verify`` builds them here again from the responses the evidence store kept
(:func:`rows_of_response`), so a row that does not come out the same was changed after
it was loaded. A row's ``content_hash`` covers its identity and content (not when it
was synced), and is what the history tables version by.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import orjson

from .models import (
    Company,
    ConnectionDetail,
    ConnectionEntry,
    Document,
    Questionnaire,
    Role,
    UserInfo,
    adapter,
)
from .responses import parse_json, parse_page

__all__ = [
    "company_row",
    "connection_row",
    "content_hash",
    "document_rows",
    "list_items",
    "questionnaire_row",
    "role_row",
    "rows_of_response",
    "template_row",
]


def content_hash(*parts: str | None) -> str:
    """A stable version hash of a row's identity and content (synced_at excluded)."""
    digest = hashlib.blake2b(digest_size=16)
    for part in parts:
        digest.update(b"\x1f" + (part or "").encode())
    return digest.hexdigest()


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def role_row(namespace: str, role: Role) -> dict[str, Any]:
    """``user_roles``: the user's role in `namespace` (endpoint 3)."""
    return {
        "namespace_company_id": namespace,
        "internal_names": _json(role.internal.names),
        "internal_company_type_ids": _json(role.internal.company_type_ids),
        "external_names": _json(role.external.names),
        "external_company_type_ids": _json(role.external.company_type_ids),
    }


def company_row(namespace: str, company_id: str, company: Company, *,
                is_namespace_company: bool) -> dict[str, Any]:
    """``companies``: a company's details (endpoint 4), asked as `company_id`."""
    row: dict[str, Any] = {
        "namespace_company_id": namespace,
        "company_id": company.id or company_id,
        "name": company.name,
        "country": company.country,
        "city": company.city,
        "lei": company.lei,
        "cin": company.cin,
        "is_namespace_company": is_namespace_company,
    }
    row["content_hash"] = content_hash(
        *(row[k] for k in ("namespace_company_id", "company_id", "name", "country", "city", "lei", "cin")),
        str(is_namespace_company),
    )
    return row


def connection_row(namespace: str, entry: ConnectionEntry, detail: ConnectionDetail | None) -> dict[str, Any]:
    """``connections``: a connection of the list (endpoint 5) with its detail and reading
    rights (endpoint 6; None when that was denied or missing)."""
    given = detail.reading_rights.given.company_type_ids if detail else []
    received = detail.reading_rights.received.company_type_ids if detail else []
    row: dict[str, Any] = {
        "namespace_company_id": namespace,
        "company_id": entry.id,
        "name": (detail.name if detail and detail.name else entry.name),
        "country": detail.country if detail else None,
        "given_company_type_ids": _json(list(given)),
        "received_company_type_ids": _json(list(received)),
        "has_detail": detail is not None,
    }
    row["content_hash"] = content_hash(
        *(row[k] for k in ("namespace_company_id", "company_id", "name", "country")),
        row["given_company_type_ids"],
        row["received_company_type_ids"],
        str(row["has_detail"]),
    )
    return row


def questionnaire_row(namespace: str, company_id: str, company_type_id: str,
                      questionnaire: Questionnaire) -> dict[str, Any]:
    """``questionnaires``: a company's answers for a company type (endpoint 7)."""
    forms_json = questionnaire.raw_json.decode()
    return {
        "namespace_company_id": namespace,
        "company_id": company_id,
        "company_type_id": company_type_id,
        "forms_json": forms_json,
        "content_hash": content_hash(namespace, company_id, company_type_id, forms_json),
    }


def document_rows(namespace: str, company_id: str, company_type_id: str,
                  documents: Sequence[Document]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``documents``: (index in the list, row) of each document of endpoint 10; a
    document listed twice is one document (its first listing)."""
    seen: set[str] = set()
    for index, document in enumerate(documents):
        if document.id in seen:
            continue
        seen.add(document.id)
        document_json = document.raw_json.decode()
        yield index, {
            "namespace_company_id": namespace,
            "company_id": company_id,
            "company_type_id": company_type_id,
            "document_id": document.id,
            "name": document.name,
            "category": document.category,
            "type": document.type,
            "issue_date": document.issue_date,
            "expiration_date": document.expiration_date,
            "document_json": document_json,
            "content_hash": content_hash(namespace, company_id, company_type_id, document.id, document_json),
        }


def template_row(namespace: str, company_type_id: str, template: Questionnaire) -> dict[str, Any]:
    """``questionnaire_templates``: a company type's questionnaire (endpoint 8)."""
    forms_json = template.raw_json.decode()
    return {
        "namespace_company_id": namespace,
        "company_type_id": company_type_id,
        "forms_json": forms_json,
        "content_hash": content_hash(namespace, company_type_id, forms_json),
    }


# -- again, from a kept response --------------------------------------------------------------
def _response(body: bytes) -> httpx.Response:
    return httpx.Response(200, content=body, headers={"content-type": "application/json"})


def list_items(body: bytes, item_type: type[Any]) -> list[Any]:
    """The items of one page of a list endpoint (5, 10), as the client reads them."""
    items, _next = parse_page(_response(body), adapter(list[item_type]))  # type: ignore[valid-type]
    return list(items)


def rows_of_response(table: str, body: bytes, key: dict[str, Any], *,
                     connection_list: Sequence[bytes] = ()) -> list[dict[str, Any]]:
    """The rows of `table` that the response `body` gives, for the row identified by
    `key` (its ``namespace_company_id``, ``company_id``, ``company_type_id`` and, for a
    company, ``is_namespace_company``). A connection's row needs the namespace's list of
    connections too (its pages, `connection_list`), whose name it falls back to.
    Raises ValueError (or a parser's error) when the body does not parse."""
    ns = str(key["namespace_company_id"])
    if table == "user_roles":
        roles = [r for r in UserInfo.model_validate(parse_json(_response(body))).roles if r.company_id == ns]
        return [role_row(ns, roles[0])] if roles else []
    if table == "companies":
        company = Company.model_validate(parse_json(_response(body)))
        return [company_row(ns, str(key["company_id"]), company,
                            is_namespace_company=bool(key.get("is_namespace_company")))]
    if table == "connections":
        entries = {e.id: e for page in connection_list for e in reversed(list_items(page, ConnectionEntry))}
        entry = entries.get(str(key["company_id"]))
        if key.get("has_detail"):
            detail = ConnectionDetail.model_validate(parse_json(_response(body)))
            return [connection_row(ns, entry or ConnectionEntry(id=str(key["company_id"])), detail)]
        return [connection_row(ns, entry, None)] if entry is not None else []
    if table == "questionnaires":
        return [questionnaire_row(ns, str(key["company_id"]), str(key["company_type_id"]),
                                  Questionnaire.from_body(parse_json(_response(body))))]
    if table == "documents":
        documents = list_items(body, Document)
        return [row for _i, row in document_rows(ns, str(key["company_id"]), str(key["company_type_id"]),
                                                 documents)]
    if table == "questionnaire_templates":
        return [template_row(ns, str(key["company_type_id"]),
                             Questionnaire.from_body(parse_json(_response(body))))]
    raise ValueError(f"no rows of {table} come from a response")
