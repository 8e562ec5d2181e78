"""Helpers of the tests that sync the sandbox into a warehouse and query it."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import pickle
import shutil
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any, TypeVar

import duckdb
import pytest

from diligence.sync import SyncResult, run_sync, source_settings
from diligence.warehouse import pipelines_dir_of
from pipelines.company_connections import SourceSettings
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer

CREDENTIALS = {"email": DEFAULT_EMAIL, "password": DEFAULT_PASSWORD}
#: the sandbox's "today" for this process: its documents' dates and answers follow it
#: (the worlds of `sandbox`, `shared_sandbox` and `synced_small`, even across midnight)
TODAY = date.today()

T = TypeVar("T")


def settings_for(server: SandboxServer, **overrides: Any) -> SourceSettings:
    """The source's settings for `server`: its login, renewed tokens not saved, then
    `overrides` (e.g. ``namespaces=[...]``, ``max_concurrency=4``)."""
    return source_settings(**{"base_url": server.base_url, **CREDENTIALS, "token_store_path": None, **overrides})


def sync(
    server: SandboxServer, warehouse: Path, *, settings: dict[str, Any] | None = None,
    namespaces: list[str] | None = None, **options: Any,
) -> SyncResult:
    """Sync `server` into `warehouse` with :func:`settings_for` its `settings`;
    `options` go to :func:`run_sync`."""
    return run_sync(warehouse, settings_for(server, namespaces=namespaces, **(settings or {})), **options)


def requests_answered(server: SandboxServer) -> int:
    """The API requests `server` has answered since its counters were last reset, read in
    this process: cheap enough to poll every few milliseconds, where a GET of
    ``/_sandbox/stats`` costs about 30 ms of CPU (httpx builds a client, TLS context
    included, for every call)."""
    return server.app.stats.total


def copy_warehouse(source: Path, target: Path) -> Path:
    """`target`: a copy of the synced warehouse `source` with dlt's folder and the evidence
    store beside it, so a
    test that changes a synced warehouse works on its own copy instead of syncing again."""
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, target)
    wal = source.with_name(source.name + ".wal")
    if wal.exists():
        shutil.copyfile(wal, target.with_name(target.name + ".wal"))
    shutil.copytree(pipelines_dir_of(source), pipelines_dir_of(target))
    evidence = source.with_name(source.name.removesuffix(".duckdb") + ".evidence")
    if evidence.is_dir():  # the evidence store beside it (its manifests name the source)
        shutil.copytree(evidence, target.with_name(target.name.removesuffix(".duckdb") + ".evidence"))
    return target


def made_once(tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], T]) -> tuple[Path, T]:
    """`make` run once for the whole test run, not once per pytest-xdist worker: the first
    worker to ask runs it in a folder that every worker's temp folders share, under a
    ``flock``, and keeps what it returns (pickled) beside it; the others wait on the lock
    and read that back. A session fixture alone is made again in each worker that meets
    it (a dbt build about 4 CPU s, a sync of the small sandbox about 5). Returns the
    folder `make` filled and its value; both are read-only to the tests (they work on
    copies). Outside xdist it is a plain session-long folder."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        folder = tmp_path_factory.mktemp(name)
        return folder, make(folder)
    root = tmp_path_factory.getbasetemp().parent  # the run's folder, above the workers'
    folder, kept = root / name, root / f"{name}.pickle"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if kept.exists():
            return folder, pickle.loads(kept.read_bytes())
        shutil.rmtree(folder, ignore_errors=True)  # what a failed attempt left
        folder.mkdir()
        value = make(folder)
        kept.with_suffix(".partial").write_bytes(pickle.dumps(value))
        kept.with_suffix(".partial").rename(kept)
        return folder, value


def query(warehouse: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    return queries(warehouse, {"": sql}, *params)[""]


def queries(warehouse: Path, sqls: dict[str, str], *params: Any) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of each named query, read through one read-only connection: every open
    replays the WAL a sync leaves (about 50 ms for the small sandbox)."""
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        return {name: con.execute(sql, list(params)).fetchall() for name, sql in sqls.items()}
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
    found = queries(warehouse, {
        name: f"select namespace_company_id, count(*) from {relation} group by 1"
        for name, relation in tables.items()
    })
    return {name: {ns: n for ns, n in rows} for name, rows in found.items()}


#: the loggers a command configures: the root and ours (`diligence.logs`), dlt's own
#: (dlt gives it a handler on the stderr of the moment the first time it resolves a setting)
COMMAND_LOGGERS = ("", "diligence", "dlt", "httpx", "httpcore")


@contextlib.contextmanager
def kept_logging() -> Iterator[None]:
    """Put the command loggers' handlers and levels back after the block, so that a
    command run in this process leaves no handler on a stream that its test then closes
    (a captured stderr), for a later test to log into."""
    saved = {name: (logging.getLogger(name).handlers[:], logging.getLogger(name).level)
             for name in COMMAND_LOGGERS}
    try:
        yield
    finally:
        for name, (handlers, level) in saved.items():
            logging.getLogger(name).handlers[:] = handlers
            logging.getLogger(name).setLevel(level)
