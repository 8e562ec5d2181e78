"""dlt source `company_connections`: every namespace of a user, landed faithfully.

Configuration arrives the dlt way (``.dlt/config.toml``, ``.dlt/secrets.toml`` or
env vars such as ``SOURCES__COMPANY_CONNECTIONS__BASE_URL``)::

    pipeline = dlt.pipeline("company_connections", destination="duckdb", dataset_name="raw")
    pipeline.run(company_connections())

Calling the source reads every namespace (see :mod:`.extract`); the resources then
yield the rows of the namespaces that were read completely. Current-state tables are
replaced per namespace (``delete-insert`` scoped to the namespaces read) and
questionnaires and documents keep their history (``scd2`` scoped the same way), so
a namespace that failed is neither loaded nor retired.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import dlt
import pyarrow as pa
import uvloop
from dlt.common.configuration import with_config
from dlt.common.schema.typing import TColumnSchema, TTableSchemaColumns
from dlt.extract import DltResource

from .auth import FileTokenStore
from .client import ServiceClient
from .extract import Extraction, NamespaceSnapshot, ProgressListener, extract_namespaces
from .settings import DEFAULT_BACKOFF_INITIAL, DEFAULT_MAX_CONCURRENCY, DEFAULT_REQUEST_TIMEOUT

__all__ = [
    "company_connections",
    "client_from_config",
    "run_coroutine",
    "Extraction",
    "NamespaceSnapshot",
    "ProgressListener",
    "TABLE_COLUMNS",
]

T = TypeVar("T")

DEFAULT_TOKEN_STORE_PATH = "data/.access_token"


def _col(data_type: str, nullable: bool = True, **hints: Any) -> TColumnSchema:
    return {"data_type": data_type, "nullable": nullable, **hints}  # type: ignore[return-value,typeddict-item]


# Lists land as JSON text in a text column: the SQL staging layer casts them to JSON.
_JSON_TEXT = "text"
_SYNCED = {"synced_at": _col("timestamp", False)}
_NS = {"namespace_company_id": _col("text", False)}

#: The declared columns of every raw table (all are created even before data arrives).
TABLE_COLUMNS: dict[str, TTableSchemaColumns] = {
    "user_roles": {
        **_NS,
        "internal_names": _col(_JSON_TEXT),
        "internal_company_type_ids": _col(_JSON_TEXT),
        "external_names": _col(_JSON_TEXT),
        "external_company_type_ids": _col(_JSON_TEXT),
        **_SYNCED,
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
        **_SYNCED,
    },
    "connections": {
        **_NS,
        "company_id": _col("text", False),
        "name": _col("text"),
        "country": _col("text"),
        "given_company_type_ids": _col(_JSON_TEXT),
        "received_company_type_ids": _col(_JSON_TEXT),
        "has_detail": _col("bool"),
        **_SYNCED,
    },
    "questionnaire_templates": {
        **_NS,
        "company_type_id": _col("text", False),
        "forms_json": _col("text"),
        **_SYNCED,
    },
    "questionnaires": {
        **_NS,
        "company_id": _col("text", False),
        "company_type_id": _col("text", False),
        "forms_json": _col("text"),
        "content_hash": _col("text", False),
        **_SYNCED,
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
        "content_hash": _col("text", False),
        **_SYNCED,
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

#: Current-state tables: replaced per namespace; value = primary key.
CURRENT_STATE: dict[str, tuple[str, ...]] = {
    "user_roles": ("namespace_company_id",),
    "companies": ("namespace_company_id", "company_id"),
    "connections": ("namespace_company_id", "company_id"),
    "questionnaire_templates": ("namespace_company_id", "company_type_id"),
}
#: Tables with history (scd2): a version per distinct content_hash.
HISTORY = ("questionnaires", "documents")


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on a new uvloop event loop (less CPU per request than asyncio's)."""
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion, also when called from inside a running event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return _run(coro)
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(_run(coro))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            error.append(exc)

    thread = threading.Thread(target=target, name="company-connections-extract")
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


@with_config(sections=("sources", "company_connections"))
def client_from_config(
    base_url: str = dlt.config.value,
    email: str | None = dlt.secrets.value,
    password: str | None = dlt.secrets.value,
    access_token: str | None = dlt.secrets.value,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    requests_per_second: float | None = None,
    max_attempts: int = 6,
    backoff_initial: float = DEFAULT_BACKOFF_INITIAL,
    token_store_path: str | None = DEFAULT_TOKEN_STORE_PATH,
    ca_bundle: str | None = None,
    allow_insecure_http: bool = False,
) -> ServiceClient:
    """A client for one run, configured like the source (same keys, same dlt resolution).

    Arguments given explicitly win; the others come from dlt config. In token-only
    mode (an access token and no password) renewed tokens go to `token_store_path`.
    """
    token_store = None
    if access_token and not password and token_store_path:
        token_store = FileTokenStore(Path(token_store_path))
    return ServiceClient(
        base_url,
        email=email,
        password=password,
        access_token=access_token,
        token_store=token_store,
        max_concurrency=max_concurrency,
        requests_per_second=requests_per_second,
        request_timeout=request_timeout,
        max_attempts=max_attempts,
        backoff_initial=backoff_initial,
        ca_bundle=ca_bundle,
        allow_insecure_http=allow_insecure_http,
    )


def _sql_literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _scope(namespaces: Sequence[str]) -> str:
    """Destination rows a merge may delete or retire: those of the namespaces read."""
    listed = ", ".join(_sql_literal(ns) for ns in namespaces)
    return f"{{table}}.namespace_company_id IN ({listed})"


_ARROW_TYPES: dict[str, pa.DataType] = {
    "text": pa.string(),
    "bool": pa.bool_(),
    "bigint": pa.int64(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}


def arrow_schema(name: str) -> pa.Schema:
    """The Arrow schema of raw table `name`, from its declared columns."""
    return pa.schema(
        [
            pa.field(column, _ARROW_TYPES[hints["data_type"]], nullable=hints.get("nullable", True))
            for column, hints in TABLE_COLUMNS[name].items()
        ]
    )


def _table_resource(
    name: str,
    rows: list[dict[str, Any]],
    write_disposition: Any,
    primary_key: Sequence[str] | None = None,
) -> DltResource:
    """A resource yielding `rows` as one Arrow table.

    Arrow skips dlt's row-by-row normalisation (the rows are already flat and typed),
    which is several times faster and lighter than dict items. A zero-row table still
    makes dlt run the table's merge, so a namespace left with no rows in a table has
    its old rows deleted or retired.
    """

    def items() -> Iterator[pa.Table]:
        table = pa.Table.from_pylist(rows, schema=arrow_schema(name))
        rows.clear()  # the Arrow copy is all dlt needs: free the Python rows now
        yield table

    return dlt.resource(
        items,
        name=name,
        write_disposition=write_disposition,
        primary_key=list(primary_key) if primary_key else None,
        columns=TABLE_COLUMNS[name],
    )


def _take_rows(snapshots: Sequence[NamespaceSnapshot], name: str) -> list[dict[str, Any]]:
    """Move the rows of table `name` out of the snapshots (they are loaded only once)."""
    rows: list[dict[str, Any]] = []
    for snapshot in snapshots:
        table_rows = getattr(snapshot, name)
        rows.extend(table_rows)
        table_rows.clear()
    return rows


def snapshot_resources(extraction: Extraction, sync_id: str) -> list[DltResource]:
    """The resources of one extraction: rows of the complete namespaces, and the run log.

    The rows move out of the extraction's snapshots into the resources, which free
    them once dlt has its Arrow copy; row counts stay in `NamespaceSnapshot.row_count`.
    """
    snapshots = list(extraction.snapshots.values())
    resources: list[DltResource] = []
    if snapshots:
        scope = _scope([s.namespace_company_id for s in snapshots])
        for name, key in CURRENT_STATE.items():
            rows = _take_rows(snapshots, name)
            resources.append(
                _table_resource(
                    name,
                    rows,
                    {"disposition": "merge", "strategy": "delete-insert", "destination_scope": scope},
                    primary_key=key,
                )
            )
        for name in HISTORY:
            rows = _take_rows(snapshots, name)
            resources.append(
                _table_resource(
                    name,
                    rows,
                    {
                        "disposition": "merge",
                        "strategy": "scd2",
                        "row_version_column_name": "content_hash",
                        "destination_scope": scope,
                        "boundary_timestamp": extraction.synced_at,
                    },
                )
            )
    issues = [(s.namespace_company_id, issue) for s in snapshots for issue in s.issues] + [
        (f.namespace_company_id, f.issue) for f in extraction.failures.values() if f.issue
    ]
    issue_rows = [
        {
            "sync_id": sync_id,
            "namespace_company_id": namespace,
            "endpoint": issue.endpoint,
            "company_id": issue.company_id,
            "company_type_id": issue.company_type_id,
            "http_status": issue.http_status,
            "message": issue.message,
            "synced_at": extraction.synced_at,
        }
        for namespace, issue in issues
    ]
    if issue_rows:
        resources.append(_table_resource("sync_issues", issue_rows, "append"))
    run_rows = [
        {
            "sync_id": sync_id,
            "namespace_company_id": s.namespace_company_id,
            "started_at": s.started_at,
            "finished_at": s.finished_at,
            "status": "success",
            "requests": s.requests,
            "rows_loaded": s.row_count,
            "issues": len(s.issues),
            "error": None,
            "synced_at": extraction.synced_at,
        }
        for s in snapshots
    ] + [
        {
            "sync_id": sync_id,
            "namespace_company_id": f.namespace_company_id,
            "started_at": f.started_at,
            "finished_at": f.finished_at,
            "status": "failed",
            "requests": f.requests,
            "rows_loaded": 0,
            "issues": 1 if f.issue else 0,
            "error": f.error,
            "synced_at": extraction.synced_at,
        }
        for f in extraction.failures.values()
    ]
    if run_rows:
        resources.append(_table_resource("sync_runs", run_rows, "append"))
    return resources


@dlt.source(name="company_connections", max_table_nesting=0)
def company_connections(
    base_url: str = dlt.config.value,
    email: str | None = dlt.secrets.value,
    password: str | None = dlt.secrets.value,
    access_token: str | None = dlt.secrets.value,
    namespaces: list[str] | None = None,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    requests_per_second: float | None = None,
    max_attempts: int = 6,
    backoff_initial: float = DEFAULT_BACKOFF_INITIAL,
    token_store_path: str | None = DEFAULT_TOKEN_STORE_PATH,
    ca_bundle: str | None = None,
    allow_insecure_http: bool = False,
    sync_id: str | None = None,
    known_namespaces: Sequence[str] = (),
    progress: ProgressListener | None = None,
    on_extracted: Callable[[Extraction], None] | None = None,
) -> list[DltResource]:
    """Read the user's namespaces and return their resources.

    Args:
        base_url: the service's base URL.
        email, password: Basic credentials for `POST /api/auth`.
        access_token: token-only mode (no password): the token is renewed before it
            expires and each renewed token is saved at once to `token_store_path`.
        namespaces: company IDs to read; default every `companyId` of user-info.
        max_concurrency: requests in flight at once over all namespaces.
        request_timeout: seconds per request attempt.
        requests_per_second: optional cap on the request rate.
        max_attempts, backoff_initial: attempts per request, and the first retry's
            backoff in seconds (it grows exponentially, with jitter).
        sync_id: identifies this sync in `sync_issues` and `sync_runs`.
        known_namespaces: namespaces synced before; with the default `namespaces`,
            those that user-info no longer lists are reported as failed (access lost).
        progress: receives request and row counts as the read goes.
        on_extracted: called with the :class:`Extraction` before anything is
            loaded, so a caller can report the namespaces that failed.
    """
    client = client_from_config(
        base_url=base_url,
        email=email,
        password=password,
        access_token=access_token,
        max_concurrency=max_concurrency,
        request_timeout=request_timeout,
        requests_per_second=requests_per_second,
        max_attempts=max_attempts,
        backoff_initial=backoff_initial,
        token_store_path=token_store_path,
        ca_bundle=ca_bundle,
        allow_insecure_http=allow_insecure_http,
    )

    async def read() -> Extraction:
        async with client:
            return await extract_namespaces(
                client, namespaces, progress=progress, known_namespaces=known_namespaces
            )

    extraction = run_coroutine(read())
    if on_extracted is not None:
        on_extracted(extraction)
    return snapshot_resources(extraction, sync_id or extraction.synced_at.strftime("%Y%m%dT%H%M%S%fZ"))
