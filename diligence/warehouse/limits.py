"""DuckDB's limits for the steps' sessions: memory, threads, and the WAL a sync leaves.

:meth:`~diligence.warehouse.owner.Warehouse.session` applies them; the sync
(:mod:`diligence.sync`) and the model build (:mod:`diligence.analytics`) pick theirs.
"""

from __future__ import annotations

__all__ = [
    "ALLOCATOR_FLUSH_THRESHOLD",
    "LOAD_MEMORY_LIMIT",
    "MODELS_MEMORY_FALLBACKS",
    "MODELS_MEMORY_LIMIT",
    "MODELS_THREADS",
    "SYNC_KEEP_WAL_BYTES",
]

#: DuckDB's buffer limit while dlt loads or the models build (it spills to disk beyond
#: it): keeps a large sync's peak memory bounded whatever the machine's RAM. A
#: namespace's merges fit in 64 MB; the sync's DuckDB lives for all its loads, so a
#: larger cache would only add to the peak (on `large`: about 50 MB more at 128 MB).
LOAD_MEMORY_LIMIT = "64MB"
MODELS_MEMORY_LIMIT = "160MB"
#: Not every DuckDB operator spills and the model build is one transaction, so a large
#: account's build can outgrow MODELS_MEMORY_LIMIT (40,000 connections need about
#: 600 MB): it is then built again under each of these in turn (None: DuckDB's default,
#: 80 % of the machine's memory).
MODELS_MEMORY_FALLBACKS: tuple[str | None, ...] = ("640MB", None)
#: Under a memory limit, DuckDB's allocator gives memory back to the system after a
#: task that used more than this (DuckDB's default: 128 MiB, i.e. hardly ever here).
ALLOCATOR_FLUSH_THRESHOLD = "16MB"
#: DuckDB's threads under the models' limit: with two, the answer models' working sets
#: outgrow 160 MB on the `large` profile (out of memory); one thread spills and fits.
MODELS_THREADS = 1
#: A sync leaves a WAL up to this size for the next open rather than writing it into
#: the file after its last load (DuckDB's own automatic checkpoint threshold).
SYNC_KEEP_WAL_BYTES = 16 * 1024 * 1024
