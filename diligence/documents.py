"""Documents on demand: download the files of new or changed documents.

For every current document in ``raw.documents`` whose version (``content_hash``) has
no stored file yet, ask the service for a signed URL (endpoint 11), download the
bytes, and record path, size and sha256 in ``raw.document_files`` (one row per
namespace x document, replaced when the document changes). A document whose file is
already stored for its current version is not fetched again.

A document fails alone: a refused or looping URL, a private address, an oversized file
or any other error fails that document, which is then a row of ``raw.sync_issues``
(endpoint ``document_file``, in its namespace's latest sync), while every other file
is downloaded and recorded. The files recorded and the issues commit together.

With evidence kept, the step writes a manifest of its own (kind ``documents``): each
URL answer (endpoint 11, without its URL's signature) and each file's SHA-256 and size
(the file's bytes are the download itself), sealed into the chain at its end.
"""

from __future__ import annotations

import asyncio
import logging
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import dlt
import duckdb
import pyarrow as pa

from pipelines.company_connections import TABLE_COLUMNS, SourceSettings, arrow_schema, run_coroutine
from pipelines.company_connections.client import ServiceClient
from pipelines.company_connections.errors import DeniedError, ServiceError

from .evidence.bucket import kept_in_step
from .evidence.keeping import evidence_log, file_modes
from .warehouse import Warehouse
from .warehouse.filemodes import make_dirs, protect

log = logging.getLogger("diligence.documents")

DOCUMENT_FILES_COLUMNS: dict[str, Any] = {
    "namespace_company_id": {"data_type": "text", "nullable": False},
    "document_id": {"data_type": "text", "nullable": False},
    "company_id": {"data_type": "text"},
    "company_type_id": {"data_type": "text"},
    "content_hash": {"data_type": "text"},
    "path": {"data_type": "text"},
    "size_bytes": {"data_type": "bigint"},
    "sha256": {"data_type": "text"},
    "downloaded_at": {"data_type": "timestamp"},
}

#: `sync_issues.endpoint` of a document whose file could not be downloaded.
DOCUMENT_FILE_ENDPOINT = "document_file"

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class DownloadSummary:
    downloaded: int = 0
    unchanged: int = 0
    failed: int = 0


def _safe(name: str | None, fallback: str) -> str:
    cleaned = _UNSAFE.sub("_", name or "").strip("._")
    return cleaned[:120] or fallback


def _pending(con: duckdb.DuckDBPyConnection, folder: Path) -> tuple[list[dict[str, Any]], int]:
    """Current documents without a stored file for their current version, read through
    `con`, a session of the warehouse."""
    tables = {
        row[0]
        for row in con.execute(
            "select table_name from information_schema.tables where table_schema = 'raw'"
        ).fetchall()
    }
    if "documents" not in tables:
        return [], 0
    stored: dict[tuple[str, str], tuple[str, str, int]] = {}
    if "document_files" in tables:
        for ns, doc, content, path, size in con.execute(
            "select namespace_company_id, document_id, content_hash, path, size_bytes "
            "from raw.document_files"
        ).fetchall():
            stored[(ns, doc)] = (content, path, size)
    latest = dict(con.execute(  # each namespace's latest sync: where a failed file's issue goes
        "select namespace_company_id, arg_max(sync_id, synced_at) from raw.sync_runs group by 1"
    ).fetchall()) if "sync_runs" in tables else {}
    rows = con.execute(
        "select namespace_company_id, company_id, company_type_id, document_id, name, content_hash "
        "from raw.documents where _dlt_valid_to is null"
    ).fetchall()
    pending, unchanged = [], 0
    for ns, company, company_type, doc, name, content in rows:
        known = stored.get((ns, doc))
        if known and known[0] == content and Path(known[1]).is_file() and Path(known[1]).stat().st_size == known[2]:
            unchanged += 1
            continue
        pending.append(
            {
                "namespace_company_id": ns,
                "company_id": company,
                "company_type_id": company_type,
                "document_id": doc,
                "content_hash": content,
                "path": str(folder / _safe(ns, "ns") / _safe(company, "company") / f"{_safe(doc, 'doc')}-{_safe(name, 'file')}"),
                "sync_id": latest.get(ns),
            }
        )
    return pending, unchanged


@dataclass
class _Fetched:
    """What the downloads gave: the files to record, the failures as sync issues."""

    files: list[dict[str, Any]]
    issues: list[dict[str, Any]]


def _issue(item: dict[str, Any], message: str, status: int | None = None) -> dict[str, Any]:
    log.error("document %s of %s: %s", item["document_id"], item["namespace_company_id"], message)
    return {
        "sync_id": item["sync_id"],
        "namespace_company_id": item["namespace_company_id"],
        "endpoint": DOCUMENT_FILE_ENDPOINT,
        "company_id": item["company_id"],
        "company_type_id": item["company_type_id"],
        "http_status": status,
        "message": f"document {item['document_id']}: {message}",
        "synced_at": datetime.now(timezone.utc),
    }


async def _fetch_all(client: ServiceClient, pending: list[dict[str, Any]]) -> _Fetched:
    fetched = _Fetched([], [])

    async def fetch(item: dict[str, Any]) -> None:
        ns, doc, dest = item["namespace_company_id"], item["document_id"], Path(item["path"])
        for attempt in (1, 2):  # a signed URL may expire before its download starts
            try:
                url = await client.document_url(ns, doc)
                if dest.parent.resolve() != dest.parent:  # a symlinked folder: never followed
                    fetched.issues.append(_issue(item, f"a folder of {dest.parent} is a symlink; not written"))
                    return
                make_dirs(dest.parent)
                result = await client.download(url.url, dest)
                protect(dest)
                client.record_document_file(ns, doc, result)
            except DeniedError as exc:
                if attempt == 1:
                    continue
                fetched.issues.append(_issue(item, "download refused", exc.status_code))
                return
            except ServiceError as exc:
                fetched.issues.append(_issue(item, str(exc), exc.status_code))
                return
            except Exception as exc:  # noqa: BLE001 - one document fails alone, whatever failed
                fetched.issues.append(_issue(item, f"{type(exc).__name__}: {exc}"))
                return
            fetched.files.append({
                key: value for key, value in item.items() if key != "sync_id"
            } | {"size_bytes": result.size, "sha256": result.sha256,
                 "downloaded_at": datetime.now(timezone.utc)})
            return

    async with client:
        await asyncio.gather(*(fetch(item) for item in pending))
    return fetched


def download_documents(
    warehouse: Warehouse, folder: Path, settings: SourceSettings, *, wait_seconds: float = 0.0
) -> DownloadSummary:
    """Download new or changed documents of `warehouse` into `folder`, reading the service
    with `settings` (the sync's); see module doc. The file is not held open while the
    documents download."""
    folder = folder.expanduser().resolve()
    summary = DownloadSummary()
    with warehouse.writing(wait_seconds=wait_seconds):
        with warehouse.session(memory_limit=None) as con:
            pending, summary.unchanged = _pending(con, folder)
        if not pending:
            return summary
        started = datetime.now(timezone.utc)
        with kept_in_step(warehouse, modes=file_modes()) as bucket:
            evidence = evidence_log(warehouse, settings, sync_id="documents-" + started.strftime("%Y%m%dT%H%M%S%fZ"),
                                    synced_at=started, kind="documents", bucket=bucket)
            committed = False
            try:
                fetched = run_coroutine(_fetch_all(settings.client(evidence=evidence), pending))
                summary.downloaded, summary.failed = len(fetched.files), len(fetched.issues)
                if fetched.files or fetched.issues:
                    warehouse.load(lambda: _resources(fetched))
                committed = True
            finally:
                if evidence is not None:  # the URLs asked and the files' hashes, sealed into the chain
                    for namespace in sorted({item["namespace_company_id"] for item in pending}):
                        evidence.writer.outcome(namespace, "committed" if committed else "failed")
                    evidence.writer.seal("complete" if committed else "failed")
    return summary


def _resources(fetched: _Fetched) -> list[Any]:
    """The dlt resources that record what the downloads gave."""
    resources = []
    if fetched.files:
        resources.append(dlt.resource(
            fetched.files,
            name="document_files",
            write_disposition={"disposition": "merge", "strategy": "delete-insert"},
            primary_key=["namespace_company_id", "document_id"],
            columns=DOCUMENT_FILES_COLUMNS,
        ))
    if fetched.issues:
        resources.append(dlt.resource(
            pa.Table.from_pylist(fetched.issues, schema=arrow_schema("sync_issues")),
            name="sync_issues",
            write_disposition="append",
            columns=TABLE_COLUMNS["sync_issues"],
        ))
    return resources
