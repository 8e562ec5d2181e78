"""The owner of one warehouse while a step writes or reads it: :class:`Warehouse`.

A warehouse is a DuckDB file (the default) or a DuckLake with a PostgreSQL catalog
(``ducklake:postgres:<conninfo>`` plus a data path, see :mod:`.location`).
:class:`Warehouse` owns either for a step. For a file it takes the writer lock
(``<warehouse>.lock``, :mod:`.lock`) once and waits until no other process holds the
file open (:mod:`.access`); for a lake it proves the catalog and data path usable before
anything is written (the lake itself takes concurrent writers). It hands out what the
steps need: the dlt pipeline that writes `raw` (one per namespace on a lake, see
:mod:`.pipelines` and :mod:`.lake_pipeline`), the staging folder of the sync's fetch,
and ONE DuckDB connection per step (:meth:`Warehouse.session`), which the models,
checks, publish, exports, report, status and alerts all read through::

    with open_warehouse(location, data_path).writing(wait_seconds=30) as wh:
        with wh.session(memory_limit=LOAD_MEMORY_LIMIT):  # the sync: the file opened once
            pipeline = wh.pipeline(namespace)             # loads through that connection
        with wh.session() as con:          # the file opened / the lake attached once
            ... build models, run checks, publish, export on `con` ...

Importing this module imports no dlt or DuckDB (the CLI's ``--help`` imports it): they
are imported where they are used, each such import saying so.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import DEFAULT_EVIDENCE_ENABLED, DEFAULT_WAREHOUSE
from ..errors import WarehouseLocationError, redact
from .access import connect_file, wait_until_writable
from .filemodes import make_dirs, private_files
from .limits import (
    ALLOCATOR_FLUSH_THRESHOLD,
    LOAD_MEMORY_LIMIT,
    MODELS_MEMORY_LIMIT,
    MODELS_THREADS,
)
from .location import WarehouseLocation, parse_location
from .lock import process_alive, reader_lock, writer_lock
from .migrate import require_readable
from .paths import companions, pipelines_dir_of, stale_temporaries, wal_of
from .pipelines import configure_dlt, pipeline_for, prune_schema_versions
from .sql import aborting_error, transaction
from .storage import S3Url, apart_from_data, is_s3_url, working_copy

if TYPE_CHECKING:
    from dlt.common.pipeline import SupportsPipeline

    from .compact import Compaction

__all__ = ["Warehouse"]

_log = logging.getLogger("diligence.sync")



def _apart_from_companions(evidence: Path, warehouse: Path) -> None:
    """Refuse an evidence store at the warehouse's own path or one of its companions
    (its WAL, lock, analysts' copy, dbt's artifacts, dlt's folder): the store would make
    the warehouse unusable, or be removed with them."""
    store = evidence.resolve()
    for companion in companions(warehouse.expanduser().resolve()):
        if store == companion or companion in store.parents:
            raise WarehouseLocationError(
                f"the evidence store cannot be {evidence}: {'that is' if store == companion else 'it is inside'} "
                f"{companion.name}, which belongs to the warehouse {warehouse}; give the evidence a folder of its "
                "own (--evidence, [evidence] path), e.g. "
                f"{warehouse.with_name(warehouse.name.removesuffix('.duckdb') + '.evidence')}")

class Warehouse:
    """The owner of one warehouse (a DuckDB file or a DuckLake) while a step writes it.

    `location` is a DuckDB file path, a ``ducklake:postgres:<conninfo>`` URI (then
    `data_path` is required), or a parsed :class:`~diligence.location.WarehouseLocation`.
    A malformed location raises :class:`~diligence.location.WarehouseLocationError` here.
    """

    def __init__(
        self,
        location: Path | str | WarehouseLocation = DEFAULT_WAREHOUSE,
        data_path: str | Path | None = None,
        *,
        pipelines_root: Path | None = None,
        evidence: str | Path | None = None,
        keep_evidence: bool = DEFAULT_EVIDENCE_ENABLED,
    ) -> None:
        if not isinstance(location, WarehouseLocation):
            location = parse_location(location, data_path)
        self.location = location
        #: the DuckDB file; None for a lake
        self.path: Path | None = location.path.expanduser() if location.path else None
        if self.path is not None and self.path.is_dir():
            raise WarehouseLocationError(
                f"the warehouse {self.path} is a folder: name a DuckDB file, "
                f"e.g. {self.path / DEFAULT_WAREHOUSE.name}"
            )
        self._pipelines_root = pipelines_root
        #: the evidence store's bucket (``s3://bucket/prefix/``), or None: a folder
        self.evidence_bucket: str | None = None
        if evidence and is_s3_url(evidence):
            self.evidence_bucket = str(S3Url.parse(str(evidence)))
            apart_from_data(self.evidence_bucket, location.data_path)
            evidence = working_copy(self.evidence_bucket)
        self._evidence = Path(evidence).expanduser() if evidence else None
        if self._evidence is not None and self.path is not None:
            _apart_from_companions(self._evidence, self.path)
        #: whether syncs keep their evidence (responses and manifests)
        self.keep_evidence = keep_evidence
        self._pipelines: dict[str | None, SupportsPipeline] = {}
        #: the session connection the file's pipeline loads through (None: its own)
        #: the session connection each pipeline loads through (None: its own)
        self._pipeline_cons: dict[str | None, Any] = {}
        self._locked = False
        self._checked = False
        self._con: Any = None
        self._memory_limit: str | None = None

    def __repr__(self) -> str:
        return f"Warehouse({self.display()!r})"

    @property
    def is_lake(self) -> bool:
        return self.location.is_lake

    def display(self) -> str:
        """The location for messages: the file path, or the lake URI without password."""
        return str(self.path) if self.path is not None else self.location.display()

    @contextlib.contextmanager
    def writing(self, *, wait_seconds: float = 0.0) -> Iterator[Warehouse]:
        """Hold the warehouse for writing.

        A file: hold the writer lock and make sure no other process has it open (a file
        written by a newer DuckDB stops here with the command that converts it). A lake:
        check the catalog and data path once and create the `raw` schema, so concurrent
        writers never initialise an empty catalog at the same time, then keep the lake
        attached (one :meth:`session`) for the whole step: what the step reads or builds
        through :meth:`session`, and what dlt loads through :meth:`pipeline`, reuses
        that one ATTACH. Re-entrant: a step run inside
        another step's `writing` reuses the lock (and the lake's session).
        """
        if self.path is None:
            from .lake import (  # start-up (DuckDB 0.13 s of imports): lake imports DuckDB
                check_location,
                initialise_retrying,
            )

            if not self._checked:
                check_location(self.location)  # before the ATTACH: its errors are clearer
            with self.session(memory_limit=None) as con:
                if not self._checked:
                    initialise_retrying(self.location, con=con)
                    self._checked = True
                yield self
            return
        require_readable(self.path)
        with private_files(), writer_lock(self.path, wait_seconds=wait_seconds):
            if not self._locked:
                wait_until_writable(self.path, wait_seconds=wait_seconds)
                for stale in stale_temporaries(self.path):  # left by a process killed mid-way
                    stale.unlink(missing_ok=True)
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
        """A file: it exists. A lake: its catalog holds a `raw` schema."""
        if self.path is not None:
            return self.path.exists()
        with self.session(read_only=True) as con:
            return bool(
                con.execute(
                    "select count(*) from information_schema.schemata "
                    "where catalog_name = current_database() and schema_name = 'raw'"
                ).fetchone()[0]
            )

    @property
    def pipelines_root(self) -> Path:
        """dlt's working folders: beside the file, or for a lake (whose writers are
        separate processes) under ``data/.dlt-pipelines/lake-<digest of the URI>``."""
        if self._pipelines_root is not None:
            return self._pipelines_root
        if self.path is not None:
            return pipelines_dir_of(self.path)
        digest = hashlib.sha256(self.location.uri.encode()).hexdigest()[:12]
        return DEFAULT_WAREHOUSE.parent.resolve() / ".dlt-pipelines" / f"lake-{digest}"

    @property
    def evidence_root(self) -> Path | None:
        """The evidence store (responses and manifests, see
        :mod:`pipelines.evidence.store`): the one given, else beside the
        warehouse (``data/warehouse.duckdb`` -> ``data/warehouse.evidence``; a lake's
        beside its data path, ``<data path>.evidence``, never inside it). A store in a
        bucket (:attr:`evidence_bucket`) is this machine's working copy of it, kept in
        step by :mod:`diligence.evidence.bucket`. None when evidence is not kept."""
        if not self.keep_evidence:
            return None
        if self._evidence is not None:
            return self._evidence
        if self.path is not None:
            return self.path.with_name(self.path.name.removesuffix(".duckdb") + ".evidence")
        data_path = str(self.location.data_path or "").rstrip("/")
        if "://" in data_path:
            raise WarehouseLocationError(
                f"a lake with its data in {redact(data_path)} keeps its evidence where "
                "[evidence] path (or DILIGENCE_EVIDENCE, --evidence) says: set it")
        return Path(data_path).expanduser().with_name(Path(data_path).name + ".evidence")

    def pipeline(self, namespace: str | None = None) -> SupportsPipeline:
        """The dlt pipeline that writes `raw` (created once per owner). A lake has one per
        namespace (dlt-hub/dlt#4297: concurrent runs must not share pipeline state or
        staging dataset), so `namespace` is required there. A pipeline made while a
        :meth:`session` is open loads through the session's connection, so a sync's runs
        open the file, or attach the lake, once; it is made again for a later session."""
        if self.path is not None:
            namespace = None
        elif namespace is None:
            raise ValueError("a lake's pipeline belongs to one namespace: pass it")
        if self._pipeline_cons.get(namespace) is not self._con:
            self._pipelines.pop(namespace, None)  # made for another (closed) session
        if namespace not in self._pipelines:
            if self.path is not None:
                self._pipelines[None] = pipeline_for(self.path, self._con)
            else:
                self._pipelines[namespace] = self._lake_pipeline(namespace)
            self._pipeline_cons[namespace] = self._con
        return self._pipelines[namespace]

    def load(self, source: Callable[[], Any], namespace: str | None = None, *,
             prepare: Callable[[Any], None] | None = None) -> Any:
        """One dlt run of `source()` into `raw`, committed whole or not at all; returns
        dlt's LoadInfo. (A lake has a pipeline per namespace: pass it.) `prepare(con)`
        runs first in the same transaction (the source's upgrade of an older `raw`).

        The source is extracted and normalized into dlt's folder, then every load job
        runs on this warehouse's session, one at a time, in one transaction (see
        :mod:`.destination`): its rows, their history, the run's log rows and dlt's own
        records commit together, or a crash, a full disk or a failed job leaves `raw`
        exactly as it was. A package an earlier attempt left unfinished is dropped
        first: nothing of it was committed, and the source makes it again. Into a lake
        the commit is one snapshot, and a commit conflict with a concurrent writer is
        retried from the start.
        """
        with self.session(memory_limit=LOAD_MEMORY_LIMIT, threads=None) as con:
            pipeline = self.pipeline(namespace)

            def whole() -> Any:
                if pipeline.has_pending_data:
                    _log.warning("discarding an unfinished load package of %s (nothing of it "
                                 "was committed); loading again from what was fetched", self.display())
                    pipeline.drop_pending_packages()
                pipeline.extract(source(), loader_file_format="parquet")
                pipeline.normalize()
                with transaction(con):
                    if prepare is not None:
                        prepare(con)
                    try:
                        info = pipeline.load(workers=1)
                        if self.path is not None:  # a lake's workers share the table: a delete there conflicts
                            prune_schema_versions(con)
                        return info
                    except Exception:
                        first = aborting_error(con)  # what the jobs failed on after it is noise
                        if first is None:
                            raise
                    raise first from None

            if self.path is not None:
                return whole()
            from .lake import (
                load_retrying,  # start-up (DuckDB 0.13 s of imports): the lake module loads DuckDB
            )

            return load_retrying(whole)

    def pipelines(self) -> list[SupportsPipeline]:
        """The pipelines created so far."""
        return list(self._pipelines.values())

    def _lake_pipeline(self, namespace: str) -> SupportsPipeline:
        import dlt  # start-up (dlt 0.9 s of imports): dlt and the lake (DuckDB) load only when a lake pipeline is made

        from .lake_pipeline import lake_pipeline_parts

        make_dirs(self.pipelines_root)
        parts = lake_pipeline_parts(
            self.location, namespace, pipelines_root=self.pipelines_root, connection=self._con
        )
        configure_dlt()
        return dlt.pipeline(
            pipeline_name=parts.pipeline_name,
            destination=parts.destination,
            dataset_name=parts.dataset_name,
            pipelines_dir=str(parts.pipelines_dir),
            progress=None,
        )

    def staging_dir(self, sync_id: str) -> Path:
        """An owner-only folder where a sync stages its fetched rows.

        Folders of earlier syncs left by a process that was killed are deleted: no run
        ever loads another run's staged rows. On a lake, several sync processes share
        the root, so only folders of processes that are gone are deleted.
        """
        root = self.pipelines_root / "staging"
        pid = os.getpid()
        if root.exists():
            for old in root.iterdir():
                owner = old.name.rsplit("-", 1)[-1]
                if self.path is None and owner.isdigit() and int(owner) != pid and process_alive(int(owner)):
                    continue
                shutil.rmtree(old, ignore_errors=True)
        make_dirs(root)
        return make_dirs(root / f"{sync_id}-{pid}")

    @contextlib.contextmanager
    def session(
        self,
        *,
        memory_limit: str | None = MODELS_MEMORY_LIMIT,
        threads: int | None = MODELS_THREADS,
        read_only: bool = False,
        keep_wal_up_to: int = 0,
    ) -> Iterator[Any]:
        """Open DuckDB once for a step (the file, or an in-memory DuckDB with the lake
        attached and selected), with the step's memory limit; nested sessions reuse it.

        While a file's session is open, every other connection this process opens to the
        file (without a config of its own) shares its database instance, so its memory
        limit bounds them all. `threads` caps DuckDB's threads under that limit (None:
        one per core; ignored without a limit); under a limit, DuckDB's allocator also
        returns memory after each large task. A file whose WAL is at most
        `keep_wal_up_to` bytes when the session ends is closed without writing the WAL
        into it: what was committed stays durable in ``<file>.wal`` and the next open
        applies it (a larger WAL is written in, so the next step does not hold it in
        memory). A read-only session of a file holds its lock shared (:func:`reader_lock`):
        it is refused while a sync writes the file, and a sync waits for it to end.
        """
        if self._con is not None:
            yield self._con
            return
        reading = reader_lock(self.path) if read_only and self.path is not None else contextlib.nullcontext()
        with private_files(), reading:
            yield from self._new_session(memory_limit, threads, read_only, keep_wal_up_to)

    def _new_session(
        self, memory_limit: str | None, threads: int | None, read_only: bool, keep_wal_up_to: int
    ) -> Iterator[Any]:
        con = self.connect(read_only=read_only)
        self._con = con
        self._memory_limit = None
        try:
            if self.path is None:
                # A lake's DuckDB lives in memory: the model build's transaction holds its
                # new tables there until the commit writes them out, so no tight bound.
                memory_limit = None
            if memory_limit is not None:  # None: DuckDB's default (exports, reading)
                con.execute(f"set memory_limit = '{memory_limit}'")
                self._memory_limit = memory_limit
                con.execute(f"set allocator_flush_threshold = '{ALLOCATOR_FLUSH_THRESHOLD}'")
                if threads is not None:
                    con.execute(f"set threads = {int(threads)}")
            yield con
        finally:
            self._con = None
            self._memory_limit = None
            if keep_wal_up_to and self.path is not None and not read_only:
                with contextlib.suppress(Exception):  # closing normally is the fallback
                    if wal_of(self.path).stat().st_size <= keep_wal_up_to:
                        con.execute("pragma disable_checkpoint_on_shutdown")
            con.close()

    @property
    def memory_limit(self) -> str | None:
        """The open session's DuckDB memory limit (None: no session, or DuckDB's default)."""
        return self._memory_limit

    def raise_memory_limit(self, limit: str | None) -> None:
        """Give the open session's DuckDB `limit` (None: DuckDB's default) instead."""
        if self._con is None:
            raise RuntimeError("no open session")
        # DuckDB's RESET shows the default again but leaves its buffer pool at the old
        # limit: the default (80 % of physical memory) is set explicitly instead
        value = limit or f"{int(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') * 0.8) // 2**20}MB"
        self._con.execute(f"set memory_limit = '{value}'")
        self._memory_limit = limit

    def remove_empty_file(self) -> None:
        """Delete the file (and its WAL) that a step created and wrote nothing into, e.g.
        a sync refused at login; nothing for a lake."""
        if self.path is not None and self._con is None:
            for path in (self.path, wal_of(self.path)):
                path.unlink(missing_ok=True)

    def compact(self) -> Compaction | None:
        """Write the file anew when a quarter of it is free (see :mod:`.compact`): for a
        step that holds the writer lock and no session, after it rewrote tables. None
        when it was not (not wasteful enough, a lake, or it could not be rewritten)."""
        if self.path is None or self._con is not None or not self._locked:
            return None
        from .compact import (  # start-up (DuckDB 0.13 s of imports): compact imports DuckDB
            compact_if_wasteful,
        )

        return compact_if_wasteful(self.path)

    def checkpoint(self) -> None:
        """Write the open file session's WAL into the file (nothing for a lake, or
        when no session is open)."""
        if self._con is not None and self.path is not None:
            self._con.execute("checkpoint")

    def connect(self, *, read_only: bool = False) -> Any:
        """A new DuckDB connection to the warehouse (the caller closes it)."""
        if self.path is not None:
            return connect_file(self.path, read_only=read_only)
        from .lake import (  # start-up (DuckDB 0.13 s of imports): lake imports DuckDB
            connect,
            connect_retrying,
        )

        if read_only:
            return connect(self.location, read_only=True)
        return connect_retrying(self.location)

    def synced_namespaces(self) -> list[str]:
        """Namespaces that some earlier sync loaded successfully."""
        rows = self.sync_runs(
            "select distinct namespace_company_id from raw.sync_runs where status = 'success' order by 1")
        return [row[0] for row in rows]

    def sync_runs(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of `sql` (a query of ``raw.sync_runs``), none while the warehouse or
        that table does not exist yet."""
        if self.path is not None and not self.path.exists():
            return []
        with self.session(read_only=self._con is None and self.path is not None) as con:
            exists = con.execute(
                "select count(*) from information_schema.tables where table_catalog = "
                "current_database() and table_schema = 'raw' and table_name = 'sync_runs'"
            ).fetchall()[0][0]
            return con.execute(sql, list(params)).fetchall() if exists else []
