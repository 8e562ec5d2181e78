"""Where a warehouse file's companions live: its WAL, the analysts' copy, dlt's folder.

Pure path arithmetic (nothing is opened), shared by the writer lock, the migration and
the :class:`~diligence.warehouse.Warehouse` itself.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["artifacts_of", "companions", "compacting_path", "lock_of", "pipelines_dir_of", "published_path",
           "publishing_path", "stale_temporaries", "wal_of"]


def wal_of(database: Path) -> Path:
    """DuckDB's write-ahead log of the database file `database` (``<file>.wal``)."""
    return database.with_name(database.name + ".wal")


def lock_of(warehouse: Path) -> Path:
    """The lock file of `warehouse` (``<file>.lock``, see :mod:`.lock`)."""
    return warehouse.with_name(warehouse.name + ".lock")


def artifacts_of(warehouse: Path) -> Path:
    """Where dbt's target folder of `warehouse`'s last build is kept (``data/warehouse.dbt``)."""
    return warehouse.with_name(warehouse.name.removesuffix(".duckdb") + ".dbt")


def companions(warehouse: Path) -> list[Path]:
    """The file `warehouse` and what lives beside it under its name: its WAL, its lock,
    DuckDB's spill folder, the analysts' copy (and its WAL), dbt's artifacts and dlt's
    working folder. Nothing else may be put at these paths (an evidence store, say)."""
    published = published_path(warehouse)
    return [warehouse, wal_of(warehouse), lock_of(warehouse), warehouse.with_name(warehouse.name + ".tmp"),
            published, wal_of(published), artifacts_of(warehouse), pipelines_dir_of(warehouse)]


def published_path(warehouse: Path) -> Path:
    """Where the analysts' read-only copy of `warehouse`'s analytics schema lives (see
    :mod:`diligence.analytics.publish`)."""
    return warehouse.with_name(f"{warehouse.stem}-analytics{warehouse.suffix or '.duckdb'}")


def publishing_path(warehouse: Path, token: str) -> Path:
    """The temporary file the analysts' copy is written to before it replaces the copy
    (``.<copy name>.<token>.tmp``, beside it)."""
    target = published_path(warehouse)
    return target.with_name(f".{target.name}.{token}.tmp")


def compacting_path(warehouse: Path, token: str) -> Path:
    """The new file `warehouse` is compacted into before it replaces it
    (``.<name>.<token>.compacting``, beside it; see :mod:`.compact`)."""
    return warehouse.with_name(f".{warehouse.name}.{token}.compacting")


def stale_temporaries(warehouse: Path) -> list[Path]:
    """New files (and their WALs) that a publish or a compaction killed mid-way left
    beside `warehouse` and its analysts' copy: delete them once the writer lock is held."""
    target = published_path(warehouse)
    patterns = [(target.parent, f".{target.name}.*.tmp"), (warehouse.parent, f".{warehouse.name}.*.compacting")]
    return sorted(found for folder, pattern in patterns
                  for found in [*folder.glob(pattern), *folder.glob(pattern + ".wal")])


def pipelines_dir_of(warehouse: Path) -> Path:
    """dlt's working folder of `warehouse`: ``<dir>/.dlt-pipelines/<stem>``."""
    warehouse = warehouse.expanduser().resolve()
    return warehouse.parent / ".dlt-pipelines" / warehouse.stem

