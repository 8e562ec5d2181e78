"""The warehouse, the one door to DuckDB: only this package opens it.

A warehouse is a DuckDB file (the default) or a DuckLake with a PostgreSQL catalog
(``ducklake:postgres:<conninfo>`` plus a data path, see :mod:`.location`).
:class:`Warehouse` owns either for a step. For a file it takes the writer lock
(``<warehouse>.lock``, :mod:`.lock`) once and waits until no other process holds the
file open; for a lake it proves the catalog and data path usable before anything is
written (the lake itself takes concurrent writers). It hands out what the steps need:
the dlt pipeline that writes `raw` (one per namespace on a lake), the staging folder of
the sync's fetch, and ONE DuckDB connection per step (:meth:`Warehouse.session`), which
the models, checks, publish, exports, report, status and alerts all read through::

    with open_warehouse(location, data_path).writing(wait_seconds=30) as wh:
        with wh.session(memory_limit=LOAD_MEMORY_LIMIT):  # the sync: the file opened once
            pipeline = wh.pipeline(namespace)             # loads through that connection
        with wh.session() as con:          # the file opened / the lake attached once
            ... build models, run checks, publish, export on `con` ...

The package::

    __init__     Warehouse (the owner), open_warehouse (settings -> Warehouse), pipeline_for
    location     parse a file path or a DuckLake URI; never opens anything
    lake         check, attach and load a DuckLake; connect() opens DuckDB (file or lake)
    lock         the writer lock, and who holds it
    paths        a file's companions: WAL, analysts' copy, dlt's folder
    sql          SQL string literals and quoted names, for statements without parameters
    migrate      convert a file a newer DuckDB wrote
    filemodes    owner-only (or group) modes for every confidential file
    destination  dlt's DuckDB destination over a session's connection

Importing the package imports no dlt or DuckDB (the CLI's ``--help`` imports it): they
are imported where they are used, each such import saying so.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..config import DEFAULT_WAREHOUSE, configured, evidence_enabled, evidence_path
from ..errors import WarehouseBusyError, WarehouseLocationError, redact
from .filemodes import make_dirs, private_files
from .location import WarehouseLocation, is_lake_uri, parse_location
from .lock import lock_holder, process_alive, protect_outputs, writer_lock
from .migrate import require_readable
from .paths import pipelines_dir_of, published_path, stale_publishing, wal_of
from .sql import transaction

if TYPE_CHECKING:
    from dlt.common.pipeline import SupportsPipeline

__all__ = [
    "DATA_PATH_ENV",
    "DEFAULT_WAREHOUSE",
    "PIPELINE_NAME",
    "RAW_DATASET",
    "WAREHOUSE_ENV",
    "Warehouse",
    "WarehouseBusyError",
    "open_warehouse",
    "pipeline_for",
    "pipelines_dir_of",
    "protect_outputs",
    "published_path",
    "table_names",
    "wal_of",
    "warehouse_settings",
    "writer_lock",
]

_log = logging.getLogger("diligence.sync")

WAREHOUSE_ENV = "DILIGENCE_WAREHOUSE"
DATA_PATH_ENV = "DILIGENCE_DATA_PATH"
PIPELINE_NAME = "company_connections"
RAW_DATASET = "raw"
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
#: The time zone of dlt's DuckDB sessions while it loads (dlt's own default).
LOAD_TIME_ZONE = "UTC"
#: Under a memory limit, DuckDB's allocator gives memory back to the system after a
#: task that used more than this (DuckDB's default: 128 MiB, i.e. hardly ever here).
ALLOCATOR_FLUSH_THRESHOLD = "16MB"
#: DuckDB's threads under the models' limit: with two, the answer models' working sets
#: outgrow 160 MB on the `large` profile (out of memory); one thread spills and fits.
MODELS_THREADS = 1
#: A sync leaves a WAL up to this size for the next open rather than writing it into
#: the file after its last load (DuckDB's own automatic checkpoint threshold).
SYNC_KEEP_WAL_BYTES = 16 * 1024 * 1024


def _configure_dlt() -> None:
    """dlt's settings for the pipelines that write `raw` (a file's or a lake's)."""
    import dlt  # start-up: importing dlt takes a second the CLI's --help must not pay

    # The source yields Arrow tables; keep dlt's load id on their rows for lineage.
    dlt.config["normalize.parquet_normalizer.add_dlt_load_id"] = True
    # The pipeline's state lives beside the warehouse, so a run need not first read it
    # back from the destination (nor write it there): each namespace is its own run.
    dlt.config["restore_from_destination"] = False
    # A loaded package's job files are copies of the rows it committed: deleted once it
    # is loaded, so dlt's folder does not keep every sync's confidential rows (the
    # package's record of what was loaded stays).
    dlt.config["load.delete_completed_jobs"] = True


def pipeline_for(warehouse: Path, connection: Any = None) -> SupportsPipeline:
    """The dlt pipeline writing `warehouse`; its local state lives beside the file.

    Keeping dlt's working folder next to the warehouse (``<dir>/.dlt-pipelines/<stem>``)
    means two warehouses never share pipeline state. With `connection` (an open DuckDB
    connection to `warehouse`, closed by its owner), every dlt run loads through it;
    without, dlt opens the file itself, and closes it whenever its last job is done,
    so each run pays for opening the file and a checkpoint several times over.
    """
    # start-up: dlt (and the destination built on it) load only when a pipeline is made
    import dlt
    from dlt.destinations.impl.duckdb.configuration import DuckDbCredentials

    from .destination import DuckDbDestination

    warehouse = warehouse.expanduser().resolve()
    make_dirs(warehouse.parent)
    pipelines_dir = pipelines_dir_of(warehouse)
    # dlt's working folder holds load packages of confidential rows: owner-only.
    make_dirs(pipelines_dir.parent, own=True)
    make_dirs(pipelines_dir, own=True)
    _configure_dlt()
    if connection is not None:
        # dlt sets the time zone (UTC) again whenever a client borrows a given
        # connection that no other client holds: up to 16 times in a namespace's run,
        # about 1 ms each there (11 ms on a new database). The connection is the sync's
        # alone, so it is set here once instead.
        connection.execute(f"set global TimeZone = '{LOAD_TIME_ZONE}'")
        credentials = DuckDbCredentials(connection, session_timezone=None)
    else:
        credentials = DuckDbCredentials(str(warehouse), global_config={"memory_limit": LOAD_MEMORY_LIMIT})
    pipeline = dlt.pipeline(
        pipeline_name=PIPELINE_NAME,
        destination=DuckDbDestination(credentials),
        dataset_name=RAW_DATASET,
        pipelines_dir=str(pipelines_dir),
        progress=None,
    )
    if not pipeline.first_run and not _holds_dlt_state(warehouse, connection):
        # The file was deleted (or replaced) while dlt's working folder stayed: its
        # state says tables exist that the new file lacks, so dlt would not create them.
        pipeline = pipeline.drop()
    return pipeline


def _holds_dlt_state(warehouse: Path, connection: Any = None) -> bool:
    """Whether `warehouse` holds dlt's record of the `raw` schema (``raw._dlt_version``)."""
    sql = ("select count(*) from information_schema.tables where table_catalog = current_database() "
           f"and table_schema = '{RAW_DATASET}' and table_name = '_dlt_version'")
    if connection is not None:
        return bool(connection.execute(sql).fetchone()[0])
    if not warehouse.exists():
        return False
    with Warehouse(warehouse).session(read_only=True, memory_limit=None) as con:
        return bool(con.execute(sql).fetchone()[0])


_LOCK_HOLDER = re.compile(r"PID (\d+)")


def _is_lock_conflict(exc: BaseException) -> bool:
    return "Could not set lock on file" in str(exc) or "Conflicting lock" in str(exc)


def wait_until_writable(warehouse: Path, *, wait_seconds: float = 0.0) -> None:
    """Return once no other process holds `warehouse` open; raise after `wait_seconds`.

    Raises :class:`WarehouseBusyError` naming the process that holds the file. A file
    that does not exist yet is held by no one (and DuckDB is not even imported).
    """
    if not warehouse.exists():
        return
    # start-up: DuckDB (through lake) loads only when there is a file to open
    import duckdb

    from .lake import connect

    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            connect(WarehouseLocation(path=warehouse)).close()
            return
        except duckdb.Error as exc:
            if not _is_lock_conflict(exc):
                raise
            if time.monotonic() >= deadline:
                raise busy(warehouse, exc, reading=False) from None
            time.sleep(0.5)


def busy(warehouse: Path, exc: BaseException, *, reading: bool) -> WarehouseBusyError:
    """The one line for a step that cannot open `warehouse` because another process holds
    it (DuckDB's lock conflict `exc`): a sync of ours, named with its pid, or a session."""
    writer = lock_holder(warehouse) if reading else None
    if writer is not None:
        return WarehouseBusyError(
            f"{warehouse} is being written by diligence sync (pid {writer}); query the analysts' "
            f"copy {published_path(warehouse)}, or try again when the sync has finished"
        )
    holder = _LOCK_HOLDER.search(str(exc))
    who = f"process {holder.group(1)}" if holder else "another process"
    if reading:
        return WarehouseBusyError(
            f"{warehouse} is open in {who}; query the analysts' copy {published_path(warehouse)}, "
            "or try again when it has finished"
        )
    return WarehouseBusyError(
        f"{warehouse} is open in {who}; close that session (analysts can query "
        f"{published_path(warehouse)} instead) or pass --wait SECONDS"
    )


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
        keep_evidence: bool = True,
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
        self._evidence = Path(evidence).expanduser() if evidence else None
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
            from .lake import check_location, initialise_retrying  # start-up: lake imports DuckDB

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
                for stale in stale_publishing(self.path):  # left by a process killed mid-way
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
        :mod:`pipelines.company_connections.store`): the one given, else beside the
        warehouse (``data/warehouse.duckdb`` -> ``data/warehouse.evidence``; a lake's
        beside its data path, ``<data path>.evidence``, never inside it). None when
        evidence is not kept."""
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
                    return pipeline.load(workers=1)

            if self.path is not None:
                return whole()
            from .lake import load_retrying  # start-up: the lake module loads DuckDB

            return load_retrying(whole)

    def pipelines(self) -> list[SupportsPipeline]:
        """The pipelines created so far."""
        return list(self._pipelines.values())

    def _lake_pipeline(self, namespace: str) -> SupportsPipeline:
        import dlt  # start-up: dlt and the lake (DuckDB) load only when a lake pipeline is made

        from .lake import lake_pipeline_parts

        make_dirs(self.pipelines_root, own=True)
        parts = lake_pipeline_parts(
            self.location, namespace, pipelines_root=self.pipelines_root, connection=self._con
        )
        _configure_dlt()
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
        make_dirs(root, own=True)
        return make_dirs(root / f"{sync_id}-{pid}", own=True)

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
        memory).
        """
        if self._con is not None:
            yield self._con
            return
        with private_files():
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

    def checkpoint(self) -> None:
        """Write the open file session's WAL into the file (nothing for a lake, or
        when no session is open)."""
        if self._con is not None and self.path is not None:
            self._con.execute("checkpoint")

    def connect(self, *, read_only: bool = False) -> Any:
        """A new DuckDB connection to the warehouse (the caller closes it)."""
        from .lake import connect, connect_retrying  # start-up: lake imports DuckDB

        if self.path is None:
            if read_only:
                return connect(self.location, read_only=True)
            return connect_retrying(self.location)
        require_readable(self.path)
        try:
            return connect(WarehouseLocation(path=self.path), read_only=read_only)
        except Exception as exc:  # duckdb.Error, not imported at start-up
            if _is_lock_conflict(exc):  # another process holds the file
                raise busy(self.path, exc, reading=read_only) from None
            raise

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


def table_names(con: Any) -> set[str]:
    """Every table and view of an open DuckDB connection, as ``schema.name``."""
    return {
        f"{schema}.{name}"
        for schema, name in con.execute(
            "select table_schema, table_name from information_schema.tables"
        ).fetchall()
    }


def warehouse_settings(
    location: str | Path | None = None, data_path: str | Path | None = None
) -> tuple[str | Path, str | None]:
    """(location, data_path): each the argument, else its env var (``DILIGENCE_WAREHOUSE``,
    ``DILIGENCE_DATA_PATH``), else config ``[warehouse] location`` / ``data_path``, else
    ``data/warehouse.duckdb`` and no data path. The one reader of those settings."""
    location = (
        location
        or os.environ.get(WAREHOUSE_ENV)
        or configured("warehouse.location", str)  # type: ignore[assignment]
        or DEFAULT_WAREHOUSE
    )
    if data_path or not is_lake_uri(location):
        # a configured data path belongs to a configured lake, not to a file given here
        return location, (str(data_path) if data_path else None)
    data_path = (
        os.environ.get(DATA_PATH_ENV)
        or configured("warehouse.data_path", str)  # type: ignore[assignment]
        or None
    )
    return location, (str(data_path) if data_path else None)  # type: ignore[return-value]


def open_warehouse(
    location: str | Path | None = None,
    data_path: str | Path | None = None,
    *,
    pipelines_root: Path | None = None,
    evidence: str | Path | None = None,
) -> Warehouse:
    """The :class:`Warehouse` of the settings (see :func:`warehouse_settings`): what the
    CLI's ``--warehouse``/``--data-path`` and the flows' ``warehouse``/``data_path``
    parameters name, else what is configured. Raises one line
    (``WarehouseLocationError``) for a malformed location, and ``WarehouseFormatError``
    for a file a newer DuckDB wrote; nothing is opened or written yet."""
    owner = Warehouse(*warehouse_settings(location, data_path), pipelines_root=pipelines_root,
                      evidence=evidence_path(evidence), keep_evidence=evidence_enabled())
    if owner.path is not None:
        require_readable(owner.path)
    return owner
