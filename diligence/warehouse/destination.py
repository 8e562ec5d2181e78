"""dlt's DuckDB destination, with its capabilities worked out once per pipeline, and
its variant that loads into a lake attached to a given connection.

A dlt run asks its destination for its capabilities again and again (extract,
normalize and load each ask), and every ask resolves the destination's whole
configuration through dlt's config providers: about 17 resolutions per sync of the
`medium` profile, Python work that holds the GIL the fetch thread needs while the
loads overlap the fetch. Within one pipeline nothing those answers depend on changes
(the destination's settings, the schema's naming convention), so
:class:`DuckDbDestination` keeps the first answer per naming convention and hands out
copies. A new pipeline (one per sync session, see
:func:`diligence.warehouse.pipeline_for`) starts afresh, so changed settings are read by
the next sync.

:class:`LakeDestination` is that destination over a connection with a DuckLake attached
(see :func:`diligence.lake.connect`): dlt's names are qualified with the lake's catalog,
so the duplicates of the connection that dlt's jobs run on write into the lake, and a
run attaches the lake no more than once (dlt's own ``ducklake`` destination opens a new
DuckDB, and attaches the lake again, for each job). The type mapping is the same: dlt's
ducklake destination uses the DuckDB destination's.
"""

from __future__ import annotations

from typing import Any, ClassVar, Optional

from dlt.common.destination import DestinationCapabilitiesContext
from dlt.common.destination.reference import DestinationReference
from dlt.common.normalizers.naming import NamingConvention
from dlt.common.schema import Schema
from dlt.destinations import duckdb
from dlt.destinations.impl.duckdb.configuration import DuckDbClientConfiguration
from dlt.destinations.impl.duckdb.duck import DuckDbClient
from dlt.destinations.impl.duckdb.sql_client import DuckDbSqlClient

from .lake import DEFAULT_ALIAS

__all__ = ["DuckDbDestination", "LakeClient", "LakeDestination", "LakeSqlClient"]

#: dlt's name of its own DuckDB factory (``dlt.destinations.duckdb``)
DUCKDB_TYPE = DestinationReference.normalize_type(f"{duckdb.__module__}.{duckdb.__qualname__}")


def _naming_key(naming: NamingConvention | None) -> tuple[Any, ...] | None:
    """What of a naming convention the capabilities depend on."""
    if naming is None:
        return None
    kind = type(naming)
    return (kind.__module__, kind.__qualname__, naming.max_length, naming.is_case_sensitive)


class DuckDbDestination(duckdb):
    """``dlt.destinations.duckdb`` that resolves its capabilities once per naming."""

    #: capabilities resolved so far, per naming convention; made on first use, since an
    #: ``__init__`` of our own would change the signature dlt reads explicit settings from
    _capabilities: dict[tuple[Any, ...] | None, DestinationCapabilitiesContext]

    @property
    def destination_type(self) -> str:
        # The same type as dlt's own factory: the pipeline's state and its destination
        # checks see the DuckDB destination they always saw.
        return DUCKDB_TYPE

    def capabilities(
        self, config: Any = None, naming: NamingConvention | None = None
    ) -> DestinationCapabilitiesContext:
        if config is not None:  # a resolved configuration: cheap, nothing to keep
            return super().capabilities(config, naming)
        known = self.__dict__.setdefault("_capabilities", {})
        key = _naming_key(naming)
        if key not in known:
            known[key] = super().capabilities(None, naming)
        # dlt sets file formats on what it gets: each caller has its own copy
        return known[key].copy()


class LakeSqlClient(DuckDbSqlClient):
    """dlt's DuckDB SQL client whose names are qualified with an attached lake's catalog.

    dlt hands each load job a duplicate of the given connection. A duplicate starts in
    DuckDB's default (in-memory) database, not in the catalog the connection selected
    with ``USE``, so ``raw.<table>`` would resolve there: naming the catalog in every
    qualified name (and in the search path) makes them resolve in the lake."""

    #: the lake's catalog in the connection dlt loads through: the alias of
    #: :func:`diligence.lake.connect`
    lake_catalog: ClassVar[str] = DEFAULT_ALIAS

    def catalog_name(self, quote: bool = True, casefold: bool = True) -> Optional[str]:
        name = self.capabilities.casefold_identifier(self.lake_catalog) if casefold else self.lake_catalog
        return self.capabilities.escape_identifier(name) if quote else name


class LakeClient(DuckDbClient):
    """dlt's DuckDB job client, loading through a :class:`LakeSqlClient`."""

    def __init__(
        self, schema: Schema, config: DuckDbClientConfiguration, capabilities: DestinationCapabilitiesContext
    ) -> None:
        super().__init__(schema, config, capabilities)
        self.sql_client = LakeSqlClient(
            self.sql_client.dataset_name, self.sql_client.staging_dataset_name, config.credentials, capabilities
        )


class LakeDestination(DuckDbDestination):
    """:class:`DuckDbDestination` loading into the lake attached (as ``lake``) to the
    DuckDB connection it is given: every load job runs on a duplicate of that one
    connection, so a dlt run attaches the lake no more than once."""

    @property
    def client_class(self) -> type[DuckDbClient]:
        return LakeClient
