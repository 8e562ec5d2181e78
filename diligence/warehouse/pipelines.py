"""The dlt pipeline that writes a DuckDB file's `raw` schema, and dlt's settings for every
pipeline of ours (a file's or a lake's, see :mod:`.lake_pipeline`).

:func:`pipeline_for` keeps dlt's working folder beside the warehouse, so two warehouses
never share pipeline state, and loads through the connection it is given (a
:meth:`~diligence.warehouse.owner.Warehouse.session`'s) with
:class:`~diligence.warehouse.destination.DuckDbDestination`. Importing this module
imports no dlt or DuckDB: each import that needs them says so.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .access import connect_file
from .filemodes import make_dirs, private_files
from .limits import LOAD_MEMORY_LIMIT
from .paths import pipelines_dir_of

if TYPE_CHECKING:
    from dlt.common.pipeline import SupportsPipeline

__all__ = ["LOAD_TIME_ZONE", "PIPELINE_NAME", "RAW_DATASET", "configure_dlt", "pipeline_for", "prune_schema_versions"]

PIPELINE_NAME = "company_connections"
RAW_DATASET = "raw"
#: The time zone of dlt's DuckDB sessions while it loads (dlt's own default).
LOAD_TIME_ZONE = "UTC"


def configure_dlt() -> None:
    """dlt's settings for the pipelines that write `raw` (a file's or a lake's)."""
    import dlt  # start-up (dlt 0.9 s of imports): importing dlt takes a second the CLI's --help must not pay
    from dlt.common.runtime.anon_tracker import disable_anon_tracker

    # The source yields Arrow tables; keep dlt's load id on their rows for lineage.
    dlt.config["normalize.parquet_normalizer.add_dlt_load_id"] = True
    # The pipeline's state lives beside the warehouse, so a run need not first read it
    # back from the destination (nor write it there): each namespace is its own run.
    dlt.config["restore_from_destination"] = False
    # A loaded package's job files are copies of the rows it committed: deleted once it
    # is loaded, so dlt's folder does not keep every sync's confidential rows (the
    # package's record of what was loaded stays).
    dlt.config["load.delete_completed_jobs"] = True
    # A signal acts at once in every step of a sync, as it does in the fetch: dlt would
    # hold the first SIGINT or SIGTERM that comes during its normalize or load and look at
    # it only between two passes of the step, and forget it when the step ends, so the
    # stop of a Prefect worker, `kill` or a Ctrl-C landing there would be lost (the sync
    # ran on, and the worker waited for it). The load is one transaction: a stop there
    # commits nothing of it.
    dlt.config["runtime.intercept_signals"] = False
    # No usage telemetry to dltHub (on by default: a request after each pipeline step),
    # as dbt's is off: a sync talks to the service and to nothing else. dlt started its
    # tracker with its default when its configuration was first read, so it is stopped
    # too (a user's own RUNTIME__DLTHUB_TELEMETRY still decides: dlt reads the environment
    # first; a Sentry DSN configured for dlt stays).
    dlt.config["runtime.dlthub_telemetry"] = False
    if not dlt.config.get("runtime.dlthub_telemetry", bool):
        disable_anon_tracker()


def pipeline_for(warehouse: Path, connection: Any = None) -> SupportsPipeline:
    """The dlt pipeline writing `warehouse`; its local state lives beside the file.

    Keeping dlt's working folder next to the warehouse (``<dir>/.dlt-pipelines/<stem>``)
    means two warehouses never share pipeline state. With `connection` (an open DuckDB
    connection to `warehouse`, closed by its owner), every dlt run loads through it;
    without, dlt opens the file itself, and closes it whenever its last job is done,
    so each run pays for opening the file and a checkpoint several times over.
    """
    # start-up (dlt 0.9 s of imports): dlt (and the destination built on it) load only when a pipeline is made
    import dlt
    from dlt.destinations.impl.duckdb.configuration import DuckDbCredentials

    from .destination import DuckDbDestination

    warehouse = warehouse.expanduser().resolve()
    make_dirs(warehouse.parent)
    pipelines_dir = pipelines_dir_of(warehouse)
    # dlt's working folder holds load packages of confidential rows: owner-only.
    make_dirs(pipelines_dir.parent)
    make_dirs(pipelines_dir)
    configure_dlt()
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


def prune_schema_versions(con: Any) -> int:
    """Delete every row of dlt's record of its schemas (``_dlt_version`` in `raw` and in
    dlt's staging dataset, ``raw_staging``) but the newest per schema; returns the rows
    deleted. Run in the load's own transaction, after dlt stored its schema.

    A sync's merge scope and history boundary are hints of the schema (one namespace,
    one sync time), so dlt stores a new ~15 KB version of the schema at every load: two
    rows a namespace a sync, which would grow the file with the number of syncs while
    the data does not. dlt reads only the newest row of a schema (and looks a version up
    by its hash only to skip storing it again), so the older rows are history nobody
    reads; the tables' columns are the schema's record, and the evidence keeps what each
    sync fetched."""
    deleted = 0
    for dataset in (RAW_DATASET, f"{RAW_DATASET}_staging"):
        exists = con.execute(
            "select count(*) from information_schema.tables where table_catalog = current_database() "
            "and table_schema = ? and table_name = '_dlt_version'", [dataset]).fetchone()[0]
        if exists:
            deleted += con.execute(
                f'delete from "{dataset}"._dlt_version v where inserted_at < '
                f'(select max(inserted_at) from "{dataset}"._dlt_version n where n.schema_name = v.schema_name)'
            ).fetchone()[0]
    return deleted


def _holds_dlt_state(warehouse: Path, connection: Any = None) -> bool:
    """Whether `warehouse` holds dlt's record of the `raw` schema (``raw._dlt_version``)."""
    sql = ("select count(*) from information_schema.tables where table_catalog = current_database() "
           f"and table_schema = '{RAW_DATASET}' and table_name = '_dlt_version'")
    if connection is not None:
        return bool(connection.execute(sql).fetchone()[0])
    if not warehouse.exists():
        return False
    # read only, with DuckDB's default memory limit: what a Warehouse's read-only session opens
    with private_files(), contextlib.closing(connect_file(warehouse, read_only=True)) as con:
        return bool(con.execute(sql).fetchone()[0])
