"""DuckDB's limits for the steps' sessions: memory, threads, and the WAL a sync leaves.

:meth:`~diligence.warehouse.owner.Warehouse.session` applies them; the sync
(:mod:`diligence.sync`) and the model build (:mod:`diligence.analytics`) pick theirs.
"""

from __future__ import annotations

import math

__all__ = [
    "ALLOCATOR_FLUSH_THRESHOLD",
    "LOAD_MEMORY_LIMIT",
    "MODELS_MEMORY_FALLBACKS",
    "MODELS_MEMORY_LIMIT",
    "MODELS_MEMORY_PER_FORM_BYTE",
    "MODELS_MEMORY_PER_HISTORY_ROW",
    "MODELS_THREADS",
    "SYNC_KEEP_WAL_BYTES",
    "megabytes",
    "models_memory_limit",
]

#: DuckDB's buffer limit while dlt loads or the models build (it spills to disk beyond
#: it): keeps a large sync's peak memory bounded whatever the machine's RAM. A
#: namespace's merges fit in 64 MB; the sync's DuckDB lives for all its loads, so a
#: larger cache would only add to the peak (on `large`: about 50 MB more at 128 MB).
LOAD_MEMORY_LIMIT = "64MB"
#: The model build's least memory limit: what a build of the current state of `large`
#: and an incremental build of its history need (two models at a time, one DuckDB
#: thread each, sharing the limit).
MODELS_MEMORY_LIMIT = "160MB"
#: What a build needs beyond that grows with the questionnaire forms it parses: the
#: current ones, and the history marts' versions it (re)builds, all of them in a full
#: build (`large` with 1,000 syncs of history: 1.05 GB of forms, which builds in 320 MB
#: and fails in 160 MB). The limit is this share of those bytes, at least
#: MODELS_MEMORY_LIMIT (:func:`models_memory_limit`), chosen before the build starts.
MODELS_MEMORY_PER_FORM_BYTE = 0.35
#: And with the history marts' rows, which every build reads whole (their key checks;
#: the marts of the current rows scan them) while two models at a time share the limit:
#: `large` with 1,000 syncs of history (5.7 million rows of `answer_history`) fails an
#: incremental build in 160 MB and builds in 240 MB; 200 syncs (1.4 million) fit in 160.
MODELS_MEMORY_PER_HISTORY_ROW = 48
#: Not every DuckDB operator spills and the model build is one transaction: should the
#: chosen limit still be too small, the build is made again under each of these in turn
#: (None: DuckDB's default, 80 % of the machine's memory), saying so in a warning.
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


def models_memory_limit(form_bytes: int, history_rows: int = 0) -> str:
    """The model build's DuckDB memory limit for a build that parses `form_bytes` of
    questionnaire forms and reads `history_rows` rows of the history marts (see
    MODELS_MEMORY_PER_FORM_BYTE and MODELS_MEMORY_PER_HISTORY_ROW)."""
    floor = math.ceil(megabytes(MODELS_MEMORY_LIMIT))
    forms = math.ceil(form_bytes * MODELS_MEMORY_PER_FORM_BYTE / 2**20)
    history = math.ceil(history_rows * MODELS_MEMORY_PER_HISTORY_ROW / 2**20)
    return f"{max(floor, forms, history)}MB"


def megabytes(limit: str) -> float:
    """A DuckDB limit such as ``640MB`` or ``1.5GB`` in megabytes."""
    number, unit = limit[:-2], limit[-2:].upper()
    return float(number) * {"KB": 2**-10, "MB": 1, "GB": 2**10}.get(unit, 1)
