"""The parts of the dlt pipeline that writes one namespace's run into a lake: its
destination, and its own pipeline name, pipelines dir and staging dataset
(:func:`lake_pipeline_parts`), from which
:meth:`~diligence.warehouse.owner.Warehouse.pipeline` makes the pipeline.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dlt
import duckdb
from dlt.common.destination import Destination
from dlt.destinations.impl.duckdb.configuration import DuckDbCredentials
from dlt.destinations.impl.ducklake.configuration import DuckLakeCredentials

from ..errors import WarehouseLocationError
from .destination import LakeDestination, LakeSqlClient
from .filemodes import make_dirs
from .lake import (
    DEFAULT_ALIAS,
    METADATA_SCHEMA,
    catalog_url,
    install_extensions,
    require_identifier,
)
from .location import WarehouseLocation
from .pipelines import LOAD_TIME_ZONE, PIPELINE_NAME, RAW_DATASET

__all__ = ["LakePipelineParts", "lake_pipeline_parts", "namespace_slug"]


@dataclass(frozen=True)
class LakePipelineParts:
    """What the dlt pipeline factory needs to write one namespace's run into a lake."""

    pipeline_name: str
    pipelines_dir: Path
    dataset_name: str
    staging_dataset_name_layout: str
    destination: Destination[Any, Any] = field(repr=False)


def namespace_slug(namespace: str) -> str:
    """A short identifier unique to `namespace`: its safe characters plus a digest, so two
    namespaces differing only in punctuation still get different names."""
    safe = re.sub(r"[^a-z0-9]+", "_", namespace.lower()).strip("_")[:40] or "ns"
    digest = hashlib.sha256(namespace.encode("utf-8")).hexdigest()[:8]
    return f"{safe}_{digest}"


def lake_pipeline_parts(
    location: WarehouseLocation,
    namespace: str,
    *,
    pipelines_root: Path,
    ducklake_name: str = DEFAULT_ALIAS,
    connection: duckdb.DuckDBPyConnection | None = None,
) -> LakePipelineParts:
    """The dlt destination and the per-namespace isolation for one namespace's run.

    Concurrent runs into one lake must not share dlt's pipeline state or its staging
    dataset (dlt-hub/dlt#4297: rows are silently lost otherwise), so each namespace gets
    its own pipeline name, pipelines dir under `pipelines_root` (owner-only: it holds
    load packages of confidential rows) and staging dataset. Use it as
    ``dlt.pipeline(pipeline_name=..., pipelines_dir=..., destination=...,
    dataset_name=...)``.

    With `connection` (a writable :func:`~diligence.warehouse.lake.connect` of
    `location` with the lake attached as `ducklake_name`, closed by its owner) dlt loads
    through it: its jobs run on duplicates of that connection, so the run attaches the
    lake no more than once.
    Without, dlt's ducklake destination opens (and attaches) a DuckDB of its own for
    the run's initialisation, each table's job and its completion.
    """
    if not location.is_lake:
        raise WarehouseLocationError(
            f"{location.display()} is a DuckDB file, not a DuckLake: no lake pipeline for it"
        )
    require_identifier(ducklake_name)
    slug = namespace_slug(namespace)
    layout = f"%s_staging_{slug}"
    pipelines_dir = make_dirs(pipelines_root.expanduser().resolve() / slug)
    if connection is not None:
        destination = _connection_destination(connection, ducklake_name, layout)
    else:
        destination = _ducklake_destination(location, ducklake_name, layout)
    return LakePipelineParts(
        pipeline_name=f"{PIPELINE_NAME}_{slug}",
        pipelines_dir=pipelines_dir,
        dataset_name=RAW_DATASET,
        staging_dataset_name_layout=layout,
        destination=destination,
    )


def _connection_destination(
    connection: duckdb.DuckDBPyConnection, ducklake_name: str, layout: str
) -> Destination[Any, Any]:
    """dlt's DuckDB destination over `connection`, qualifying names with the lake's
    catalog `ducklake_name`."""
    if ducklake_name != LakeSqlClient.lake_catalog:
        raise WarehouseLocationError(
            f"dlt loads through a connection with the lake attached as "
            f"{LakeSqlClient.lake_catalog!r}, not {ducklake_name!r}"
        )
    # dlt's sessions load in UTC (its default); set on each of its duplicates only, so
    # the owner's own session keeps its time zone.
    credentials = DuckDbCredentials(
        connection, session_timezone=None, local_config={"TimeZone": LOAD_TIME_ZONE}
    )
    return LakeDestination(credentials=credentials, staging_dataset_name_layout=layout)


def _ducklake_destination(
    location: WarehouseLocation, ducklake_name: str, layout: str
) -> Destination[Any, Any]:
    """dlt's ducklake destination: a DuckDB of its own, attaching the lake, per job."""
    assert location.data_path is not None
    credentials = DuckLakeCredentials(
        ducklake_name,
        catalog=catalog_url(location),
        storage=location.data_path,
        metadata_schema=METADATA_SCHEMA,
    )
    # The ducklake attach autoloads the extensions from DuckDB's extension directory:
    # install them there from the wheels once per process.
    install_extensions()
    return dlt.destinations.ducklake(credentials=credentials, staging_dataset_name_layout=layout)

