"""The warehouse, the one door to DuckDB: only this package opens it.

A warehouse is a DuckDB file (the default) or a DuckLake with a PostgreSQL catalog; a
step holds it through one :class:`Warehouse` (see :mod:`.owner`). The package::

    owner          Warehouse: the lock, the step's DuckDB session, its dlt pipelines, load()
    settings       warehouse_settings (arguments, env, config -> location), open_warehouse
    limits         DuckDB's memory limits, threads and kept WAL for the steps' sessions
    pipelines      pipeline_for: the dlt pipeline that writes a file's `raw`; dlt's settings
    lake_pipeline  the parts of a lake namespace's dlt pipeline (destination, isolation)
    destination    dlt's DuckDB destination over a session's connection (file or lake)
    access         open a file another process may hold; wait for it; the "busy" line
    location       parse a file path or a DuckLake URI; never opens anything
    lake           check, attach and load a DuckLake; connect() opens DuckDB (file or lake)
    lock           the writer lock, and who holds it
    paths          a file's companions: WAL, analysts' copy, dlt's folder
    sql            SQL string literals and quoted names, table_names, transaction
    migrate        convert a file a newer DuckDB wrote
    compact        write a file anew once a quarter of it is free
    filemodes      owner-only (or group) modes for every confidential file

Importing the package imports no dlt or DuckDB (the CLI's ``--help`` imports it): they
are imported where they are used, each such import saying so.
"""

from __future__ import annotations

from ..config import DEFAULT_WAREHOUSE
from ..errors import WarehouseBusyError
from .access import busy, wait_until_writable
from .limits import (
    ALLOCATOR_FLUSH_THRESHOLD,
    LOAD_MEMORY_LIMIT,
    MODELS_MEMORY_FALLBACKS,
    MODELS_MEMORY_LIMIT,
    MODELS_THREADS,
    SYNC_KEEP_WAL_BYTES,
    models_memory_limit,
)
from .lock import protect_outputs, writer_lock
from .owner import Warehouse
from .paths import pipelines_dir_of, published_path, wal_of
from .pipelines import LOAD_TIME_ZONE, PIPELINE_NAME, RAW_DATASET, pipeline_for
from .settings import DATA_PATH_ENV, WAREHOUSE_ENV, open_warehouse, warehouse_settings
from .sql import table_names

__all__ = [
    "ALLOCATOR_FLUSH_THRESHOLD",
    "DATA_PATH_ENV",
    "DEFAULT_WAREHOUSE",
    "LOAD_MEMORY_LIMIT",
    "LOAD_TIME_ZONE",
    "MODELS_MEMORY_FALLBACKS",
    "MODELS_MEMORY_LIMIT",
    "MODELS_THREADS",
    "PIPELINE_NAME",
    "RAW_DATASET",
    "SYNC_KEEP_WAL_BYTES",
    "WAREHOUSE_ENV",
    "Warehouse",
    "WarehouseBusyError",
    "busy",
    "models_memory_limit",
    "open_warehouse",
    "pipeline_for",
    "pipelines_dir_of",
    "protect_outputs",
    "published_path",
    "table_names",
    "wait_until_writable",
    "wal_of",
    "warehouse_settings",
    "writer_lock",
]
