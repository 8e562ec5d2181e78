"""The raw tables: declared columns, keys, write dispositions and Arrow schemas.

Every raw table is declared here once; the source (:mod:`pipelines.company_connections`)
turns these declarations into dlt resource hints and the fetch
(:mod:`.staging`) writes rows in exactly these Arrow schemas.

History tables (``scd2``) keep a version per distinct ``content_hash``; the hash covers
the namespace, the row's identity and its content (never ``synced_at`` or
``response_sha256``), so the same company read by two namespaces is two independent
histories, and a version keeps the response it was first read from.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from dlt.common.schema.typing import TColumnSchema, TTableSchemaColumns

__all__ = ["TABLE_COLUMNS", "CURRENT_STATE", "HISTORY", "LOG_TABLES", "NAMESPACE_TABLES", "WHOLE_RUN_ONLY",
           "arrow_schema", "upgrade_raw"]


def _col(data_type: str, nullable: bool = True, **hints: Any) -> TColumnSchema:
    return {"data_type": data_type, "nullable": nullable, **hints}  # type: ignore[return-value,typeddict-item]


# Lists land as JSON text in a text column: the SQL staging layer casts them to JSON.
_JSON_TEXT = "text"
_SYNCED = {"synced_at": _col("timestamp", False)}
_NS = {"namespace_company_id": _col("text", False)}
_HASH = {"content_hash": _col("text", False)}
#: the SHA-256 of the response the row version was read from (its bytes are in the
#: evidence store); NULL for rows loaded before the evidence was kept, or without it
_RESPONSE = {"response_sha256": _col("text")}

#: The declared columns of every raw table (all are created even before data arrives).
TABLE_COLUMNS: dict[str, TTableSchemaColumns] = {
    "user_roles": {
        **_NS,
        "internal_names": _col(_JSON_TEXT),
        "internal_company_type_ids": _col(_JSON_TEXT),
        "external_names": _col(_JSON_TEXT),
        "external_company_type_ids": _col(_JSON_TEXT),
        **_SYNCED,
        **_RESPONSE,
    },
    "companies": {
        **_NS,
        "company_id": _col("text", False),
        "name": _col("text"),
        "country": _col("text"),
        "city": _col("text"),
        "lei": _col("text"),
        "cin": _col("text"),
        "is_namespace_company": _col("bool"),
        **_HASH,
        **_SYNCED,
        **_RESPONSE,
    },
    "connections": {
        **_NS,
        "company_id": _col("text", False),
        "name": _col("text"),
        "country": _col("text"),
        "given_company_type_ids": _col(_JSON_TEXT),
        "received_company_type_ids": _col(_JSON_TEXT),
        "has_detail": _col("bool"),
        **_HASH,
        **_SYNCED,
        **_RESPONSE,
    },
    "questionnaire_templates": {
        **_NS,
        "company_type_id": _col("text", False),
        "forms_json": _col("text"),
        **_HASH,
        **_SYNCED,
        **_RESPONSE,
    },
    "questionnaires": {
        **_NS,
        "company_id": _col("text", False),
        "company_type_id": _col("text", False),
        "forms_json": _col("text"),
        **_HASH,
        **_SYNCED,
        **_RESPONSE,
    },
    "documents": {
        **_NS,
        "company_id": _col("text", False),
        "company_type_id": _col("text", False),
        "document_id": _col("text", False),
        "name": _col("text"),
        "category": _col("text"),
        "type": _col("text"),
        "issue_date": _col("text"),
        "expiration_date": _col("text"),
        "document_json": _col("text"),
        **_HASH,
        **_SYNCED,
        **_RESPONSE,
    },
    # every key path the service sent per endpoint (see .keys); response: the least sha256 that had it
    "service_keys": {
        **_NS,
        "endpoint": _col("text", False),
        "key_path": _col("text", False),
        "is_modelled": _col("bool", False),
        **_HASH,
        **_SYNCED,
        **_RESPONSE,
    },
    "sync_issues": {
        "sync_id": _col("text", False),
        **_NS,
        "endpoint": _col("text", False),
        "company_id": _col("text"),
        "company_type_id": _col("text"),
        "http_status": _col("bigint"),
        "message": _col("text"),
        **_SYNCED,
    },
    "sync_runs": {
        "sync_id": _col("text", False),
        **_NS,
        "started_at": _col("timestamp"),
        "finished_at": _col("timestamp"),
        "status": _col("text", False),
        "requests": _col("bigint"),
        "rows_loaded": _col("bigint"),
        "issues": _col("bigint"),
        "error": _col("text"),
        **_SYNCED,
    },
}

#: Current-state tables: replaced per namespace (delete-insert); value = primary key.
CURRENT_STATE: dict[str, tuple[str, ...]] = {
    "user_roles": ("namespace_company_id",),
}
#: Tables with history (scd2): a version per distinct content_hash.
HISTORY: tuple[str, ...] = (
    "companies", "connections", "questionnaire_templates", "questionnaires", "documents", "service_keys",
)
#: History tables of whole endpoints: loaded only by a run that reads every resource
#: (a run of some resources would retire the keys of the others).
WHOLE_RUN_ONLY: tuple[str, ...] = ("service_keys",)
#: Tables a namespace's fetch fills (staged per namespace, loaded atomically).
NAMESPACE_TABLES: tuple[str, ...] = (*CURRENT_STATE, *HISTORY)
#: The run log: appended for every namespace, loaded or not.
LOG_TABLES: tuple[str, ...] = ("sync_issues", "sync_runs")

_ARROW_TYPES: dict[str, pa.DataType] = {
    "text": pa.string(),
    "bool": pa.bool_(),
    "bigint": pa.int64(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}


def upgrade_raw(con: Any) -> None:
    """Bring `raw` written by an older release to the shape declared here, on `con` (in
    the load's transaction, before dlt writes): ``questionnaire_templates`` was a current-
    state table and is now versioned, so its rows get their content hash (as the fetch
    computes it) and a validity from their ``synced_at``; dlt's scd2 then carries on from
    them (an unchanged template stays one version)."""
    from .rows import content_hash

    present = {
        row[0] for row in con.execute(
            "select column_name from information_schema.columns where table_catalog = current_database() "
            "and table_schema = 'raw' and table_name = 'questionnaire_templates'").fetchall()
    }
    if not present or "content_hash" in present:
        return
    # dlt's staging copy of the table (emptied by every merge) is made again in the new shape
    con.execute("drop table if exists raw_staging.questionnaire_templates")
    table = "raw.questionnaire_templates"
    con.execute(f"alter table {table} add column content_hash varchar")
    con.execute(f"alter table {table} add column _dlt_valid_from timestamp with time zone")
    con.execute(f"alter table {table} add column _dlt_valid_to timestamp with time zone")
    rows = con.execute(f"select namespace_company_id, company_type_id, forms_json from {table}").fetchall()
    con.executemany(
        f"update {table} set content_hash = ?, _dlt_valid_from = synced_at "
        "where namespace_company_id = ? and company_type_id = ?",
        [[content_hash(ns, type_id, forms), ns, type_id] for ns, type_id, forms in rows],
    )


def arrow_schema(name: str) -> pa.Schema:
    """The Arrow schema of raw table `name`, from its declared columns."""
    return pa.schema(
        [
            pa.field(column, _ARROW_TYPES[hints["data_type"]], nullable=hints.get("nullable", True))
            for column, hints in TABLE_COLUMNS[name].items()
        ]
    )
