"""Helpers of the tests that sync the sandbox into a warehouse and query it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import duckdb

from diligence.sync import SyncResult, run_sync
from diligence.warehouse import pipelines_dir_of
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer

CREDENTIALS = {"email": DEFAULT_EMAIL, "password": DEFAULT_PASSWORD}


def sync(server: SandboxServer, warehouse: Path, **options: Any) -> SyncResult:
    source_options = {**CREDENTIALS, "token_store_path": None, **options.pop("source_options", {})}
    return run_sync(warehouse, base_url=server.base_url, source_options=source_options, **options)


def copy_warehouse(source: Path, target: Path) -> Path:
    """`target`: a copy of the synced warehouse `source` with dlt's folder beside it, so a
    test that changes a synced warehouse works on its own copy instead of syncing again."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    wal = source.with_name(source.name + ".wal")
    if wal.exists():
        shutil.copyfile(wal, target.with_name(target.name + ".wal"))
    shutil.copytree(pipelines_dir_of(source), pipelines_dir_of(target))
    return target


def query(warehouse: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return con.execute(sql, list(params)).fetchall()
    finally:
        con.close()


def current_counts(warehouse: Path) -> dict[str, dict[str, int]]:
    """Current-state row counts per raw table and namespace."""
    tables = {
        "companies": "raw.companies where _dlt_valid_to is null",
        "connections": "raw.connections where _dlt_valid_to is null",
        "questionnaire_templates": "raw.questionnaire_templates",
        "questionnaires": "raw.questionnaires where _dlt_valid_to is null",
        "documents": "raw.documents where _dlt_valid_to is null",
    }
    counts: dict[str, dict[str, int]] = {}
    for name, relation in tables.items():
        rows = query(
            warehouse, f"select namespace_company_id, count(*) from {relation} group by 1"
        )
        counts[name] = {ns: n for ns, n in rows}
    return counts
