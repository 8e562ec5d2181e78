"""Where the warehouse lives, the dlt pipeline that writes it, and the writer lock."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # dlt takes seconds to import: only the commands that load import it
    from dlt.common.pipeline import SupportsPipeline

DEFAULT_WAREHOUSE = Path("data/warehouse.duckdb")
PIPELINE_NAME = "company_connections"
RAW_DATASET = "raw"
#: DuckDB's buffer limit while dlt loads (it spills to disk beyond it): keeps a large
#: sync's peak memory bounded whatever the machine's RAM.
LOAD_MEMORY_LIMIT = "512MB"


class WarehouseBusyError(RuntimeError):
    """Another sync holds the warehouse's writer lock."""


def pipeline_for(warehouse: Path) -> SupportsPipeline:
    """The dlt pipeline writing `warehouse`; its local state lives beside the file.

    Keeping dlt's working folder next to the warehouse (``<dir>/.dlt-pipelines/<stem>``)
    means two warehouses never share pipeline state.
    """
    import dlt
    from dlt.destinations.impl.duckdb.configuration import DuckDbCredentials

    warehouse = warehouse.expanduser().resolve()
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    pipelines_dir = warehouse.parent / ".dlt-pipelines" / warehouse.stem
    # dlt's working folder holds load packages of confidential rows: owner-only.
    pipelines_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    pipelines_dir.parent.chmod(0o700)
    pipelines_dir.chmod(0o700)
    # The source yields Arrow tables; keep dlt's load id on their rows for lineage.
    dlt.config["normalize.parquet_normalizer.add_dlt_load_id"] = True
    return dlt.pipeline(
        pipeline_name=PIPELINE_NAME,
        destination=dlt.destinations.duckdb(
            DuckDbCredentials(str(warehouse), global_config={"memory_limit": LOAD_MEMORY_LIMIT})
        ),
        dataset_name=RAW_DATASET,
        pipelines_dir=str(pipelines_dir),
        progress=None,
    )


@contextlib.contextmanager
def writer_lock(warehouse: Path, *, wait_seconds: float = 0.0) -> Iterator[None]:
    """Hold the warehouse's writer lock (``<warehouse>.lock``) for a sync or a model build.

    A second writer waits up to `wait_seconds`, then raises :class:`WarehouseBusyError`
    naming the process that holds the lock. The lock is an OS file lock, so it is
    released when its holder dies, even by SIGKILL.
    """
    warehouse = warehouse.expanduser().resolve()
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    lock_path = warehouse.with_name(warehouse.name + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_seconds
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                    raise WarehouseBusyError(
                        f"another sync is writing {warehouse} (pid {holder}); "
                        "try again when it has finished, or pass --wait SECONDS"
                    ) from None
                time.sleep(0.2)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)
