"""The warehouse and its one owner while a step writes it.

:class:`Warehouse` owns a DuckDB warehouse file for a step: it takes the writer lock
(``<warehouse>.lock``) once, waits until no other process holds the file open, and
hands out what the steps need: the dlt pipeline that writes `raw`, the staging folder
of the sync's fetch, and DuckDB connections::

    with Warehouse(path).writing(wait_seconds=30) as wh:
        pipeline = wh.pipeline()          # created once, cached
        ... load, build models, run checks, publish ...

This module imports no dlt or DuckDB at import time (``DEFAULT_WAREHOUSE`` is cheap to
import for the CLI); they are imported where they are used.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import WarehouseBusyError
from .filemodes import make_dirs, protect, protect_tree

if TYPE_CHECKING:
    from dlt.common.pipeline import SupportsPipeline

__all__ = [
    "DEFAULT_WAREHOUSE",
    "PIPELINE_NAME",
    "RAW_DATASET",
    "Warehouse",
    "WarehouseBusyError",
    "pipeline_for",
    "protect_outputs",
    "table_names",
    "writer_lock",
]

DEFAULT_WAREHOUSE = Path("data/warehouse.duckdb")
PIPELINE_NAME = "company_connections"
RAW_DATASET = "raw"
#: DuckDB's buffer limit while dlt loads or the models build (it spills to disk beyond
#: it): keeps a large sync's peak memory bounded whatever the machine's RAM.
LOAD_MEMORY_LIMIT = "128MB"
MODELS_MEMORY_LIMIT = "160MB"


def pipelines_dir_of(warehouse: Path) -> Path:
    """dlt's working folder of `warehouse`: ``<dir>/.dlt-pipelines/<stem>``."""
    warehouse = warehouse.expanduser().resolve()
    return warehouse.parent / ".dlt-pipelines" / warehouse.stem


def pipeline_for(warehouse: Path) -> SupportsPipeline:
    """The dlt pipeline writing `warehouse`; its local state lives beside the file.

    Keeping dlt's working folder next to the warehouse (``<dir>/.dlt-pipelines/<stem>``)
    means two warehouses never share pipeline state.
    """
    import dlt
    from dlt.destinations.impl.duckdb.configuration import DuckDbCredentials

    warehouse = warehouse.expanduser().resolve()
    make_dirs(warehouse.parent)
    pipelines_dir = pipelines_dir_of(warehouse)
    # dlt's working folder holds load packages of confidential rows: owner-only.
    make_dirs(pipelines_dir.parent, own=True)
    make_dirs(pipelines_dir, own=True)
    # The source yields Arrow tables; keep dlt's load id on their rows for lineage.
    dlt.config["normalize.parquet_normalizer.add_dlt_load_id"] = True
    # The pipeline's state lives beside the warehouse, so a run need not first read it
    # back from the destination (nor write it there): each namespace is its own run.
    dlt.config["restore_from_destination"] = False
    return dlt.pipeline(
        pipeline_name=PIPELINE_NAME,
        destination=dlt.destinations.duckdb(
            DuckDbCredentials(str(warehouse), global_config={"memory_limit": LOAD_MEMORY_LIMIT})
        ),
        dataset_name=RAW_DATASET,
        pipelines_dir=str(pipelines_dir),
        progress=None,
    )


#: Locks this process holds, per (warehouse, thread): nested steps reuse the lock.
_held: dict[tuple[Path, int], int] = {}
_held_guard = threading.Lock()


@contextlib.contextmanager
def writer_lock(warehouse: Path, *, wait_seconds: float = 0.0) -> Iterator[None]:
    """Hold the warehouse's writer lock (``<warehouse>.lock``) for a sync or a model build.

    A second writer waits up to `wait_seconds`, then raises :class:`WarehouseBusyError`
    naming the process that holds the lock. The lock is an OS file lock, so it is
    released when its holder dies, even by SIGKILL. Re-entrant within a thread: a
    step inside another step that holds the lock does not take it again.
    """
    warehouse = warehouse.expanduser().resolve()
    key = (warehouse, threading.get_ident())
    with _held_guard:
        nested = key in _held
        if nested:
            _held[key] += 1
    if nested:
        try:
            yield
        finally:
            with _held_guard:
                _held[key] -= 1
        return
    with _flock(warehouse, wait_seconds):
        with _held_guard:
            _held[key] = 1
        try:
            yield
        finally:
            with _held_guard:
                del _held[key]
            protect_outputs(warehouse)


def protect_outputs(warehouse: Path) -> None:
    """Give what the writers of `warehouse` wrote the configured modes (see
    :mod:`diligence.filemodes`): DuckDB and dlt create their files with the umask's."""
    from .publish import published_path

    warehouse = warehouse.expanduser().resolve()
    protect(
        warehouse,
        warehouse.with_name(warehouse.name + ".wal"),
        published_path(warehouse),
    )
    protect_tree(pipelines_dir_of(warehouse))


@contextlib.contextmanager
def _flock(warehouse: Path, wait_seconds: float) -> Iterator[None]:
    """Hold ``<warehouse>.lock``; the file is removed on release, so none is ever stale.

    Removing it is safe: a writer that opened the file just before its holder removed
    it finds, once it has the lock, that the path no longer names its file, and takes
    the lock again on the new one.
    """
    make_dirs(warehouse.parent)
    lock_path = warehouse.with_name(warehouse.name + ".lock")
    deadline = time.monotonic() + wait_seconds
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            _acquire(fd, warehouse, deadline)
        except BaseException:
            os.close(fd)
            raise
        try:
            current = os.stat(lock_path).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fd).st_ino:
            break
        os.close(fd)  # locked a file its holder has removed: lock the new one
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_path)  # still held: no other writer can be using it
        os.close(fd)


def _acquire(fd: int, warehouse: Path, deadline: float) -> None:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
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


class Warehouse:
    """The owner of one warehouse file while a step (or the whole pipeline) writes it."""

    def __init__(self, path: Path = DEFAULT_WAREHOUSE) -> None:
        self.path = Path(path).expanduser()
        self._pipeline: SupportsPipeline | None = None
        self._locked = False

    def __repr__(self) -> str:
        return f"Warehouse({str(self.path)!r})"

    @contextlib.contextmanager
    def writing(self, *, wait_seconds: float = 0.0) -> Iterator[Warehouse]:
        """Hold the writer lock and make sure no other process has the file open.

        Re-entrant: a step run inside another step's `writing` reuses the lock.
        """
        from .publish import wait_until_writable

        with writer_lock(self.path, wait_seconds=wait_seconds):
            if not self._locked:
                wait_until_writable(self.path, wait_seconds=wait_seconds)
            outer = self._locked
            self._locked = True
            try:
                yield self
            finally:
                self._locked = outer

    @property
    def locked(self) -> bool:
        return self._locked

    def exists(self) -> bool:
        return self.path.exists()

    def pipeline(self) -> SupportsPipeline:
        """The dlt pipeline that writes `raw` (created once per owner)."""
        if self._pipeline is None:
            self._pipeline = pipeline_for(self.path)
        return self._pipeline

    def staging_dir(self, sync_id: str) -> Path:
        """An owner-only folder where a sync stages its fetched rows.

        Folders of earlier syncs (left by a process that was killed) are deleted: no
        run ever loads another run's staged rows.
        """
        root = pipelines_dir_of(self.path) / "staging"
        if root.exists():
            for old in root.iterdir():
                shutil.rmtree(old, ignore_errors=True)
        make_dirs(root, own=True)
        return make_dirs(root / sync_id, own=True)

    @contextlib.contextmanager
    def session(self, *, memory_limit: str = MODELS_MEMORY_LIMIT) -> Iterator[Any]:
        """Open DuckDB once for a step, with the step's memory limit.

        While the session is open, every other connection this process opens to the file
        (without a config of its own) shares its database instance, so its memory limit
        bounds them all (the model build, for one).
        """
        con = self.connect()
        try:
            con.execute(f"set memory_limit = '{memory_limit}'")
            yield con
        finally:
            con.close()

    def connect(self, *, read_only: bool = False) -> Any:
        """A DuckDB connection to the file (the caller closes it)."""
        import duckdb

        return duckdb.connect(str(self.path), read_only=read_only)

    def synced_namespaces(self) -> list[str]:
        """Namespaces that some earlier sync loaded successfully."""
        if not self.path.exists():
            return []
        con = self.connect(read_only=True)
        try:
            exists = con.execute(
                "select count(*) from information_schema.tables "
                "where table_schema = 'raw' and table_name = 'sync_runs'"
            ).fetchall()[0][0]
            if not exists:
                return []
            rows = con.execute(
                "select distinct namespace_company_id from raw.sync_runs "
                "where status = 'success' order by 1"
            ).fetchall()
        finally:
            con.close()
        return [row[0] for row in rows]


def table_names(con: Any) -> set[str]:
    """Every table and view of an open DuckDB connection, as ``schema.name``."""
    return {
        f"{schema}.{name}"
        for schema, name in con.execute(
            "select table_schema, table_name from information_schema.tables"
        ).fetchall()
    }
