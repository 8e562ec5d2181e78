"""dlt's DuckDB destination, with its capabilities worked out once per pipeline, loading
through the connection it is given, in the transaction its owner opened there; and its
variant that loads into a lake attached to that connection.

One namespace commits whole or not at all. dlt runs each load job in a transaction of
its own, on a duplicate of the connection it was given (dlt-hub/dlt#3456 asks for one
commit per run): a process killed between two jobs left some tables merged and others
not. Given a connection, these clients work on that connection itself (never a
duplicate), open and commit no transaction of their own, and roll nothing back on an
error: every job of the run (the schema's DDL, the copies, the merges, dlt's own
``_dlt_loads`` and ``_dlt_version`` rows) runs in the one transaction the caller opened,
which commits them together or rolls them all back (:func:`diligence.sync` loads each
namespace so, its jobs one at a time). Without a given connection dlt's own behaviour
applies.

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

import contextlib
from collections.abc import Iterator
from typing import Any, AnyStr, ClassVar, Optional

from dlt.common.destination import DestinationCapabilitiesContext
from dlt.common.destination.dataset import DBApiCursor
from dlt.common.destination.reference import DestinationReference
from dlt.common.normalizers.naming import NamingConvention
from dlt.common.schema import Schema
from dlt.destinations import duckdb
from dlt.destinations.impl.duckdb.configuration import DuckDbClientConfiguration
from dlt.destinations.impl.duckdb.duck import DuckDbClient
from dlt.destinations.impl.duckdb.sql_client import DuckDbSqlClient
from dlt.destinations.sql_client import raise_database_error
from dlt.destinations.typing import DBTransaction

from .lake import DEFAULT_ALIAS
from .sql import reporting_aborts

__all__ = ["DuckDbDestination", "FileClient", "FileSqlClient", "LakeClient", "LakeDestination", "LakeSqlClient"]

#: dlt's name of its own DuckDB factory (``dlt.destinations.duckdb``)
DUCKDB_TYPE = DestinationReference.normalize_type(f"{duckdb.__module__}.{duckdb.__qualname__}")


def _naming_key(naming: NamingConvention | None) -> tuple[Any, ...] | None:
    """What of a naming convention the capabilities depend on."""
    if naming is None:
        return None
    kind = type(naming)
    return (kind.__module__, kind.__qualname__, naming.max_length, naming.is_case_sensitive)


class _GivenConnection(DuckDbSqlClient):
    """dlt's DuckDB SQL client on the connection its destination was given, in the
    transaction the owner of that connection opened (see the module docstring)."""

    _given = False

    def open_connection(self) -> Any:
        connection = self.credentials.external_conn()
        if connection is None:
            return super().open_connection()
        # an earlier job's statement may have aborted the owner's transaction: its error
        # is the cause to report (a bucket gone, a full disk), not "transaction aborted"
        with reporting_aborts(connection):
            for name, value in (self.credentials.local_config or {}).items():
                connection.execute(f"set session {name} = ?", [value])
        self._conn, self._given = connection, True
        return connection

    def close_connection(self) -> None:
        if self._given:  # the owner's: it stays open
            self._conn, self._given = None, False
            return
        super().close_connection()

    @contextlib.contextmanager
    def begin_transaction(self) -> Iterator[DBTransaction]:
        if not self._given:
            with super().begin_transaction() as transaction:
                yield transaction
            return
        yield self  # within the owner's transaction, which commits or rolls back the run

    def commit_transaction(self) -> None:
        if not self._given:
            super().commit_transaction()

    def rollback_transaction(self) -> None:
        if not self._given:
            super().rollback_transaction()

    @contextlib.contextmanager
    def execute_query(self, query: AnyStr, *args: Any, **kwargs: Any) -> Iterator[DBApiCursor]:
        if not self._given:
            with super().execute_query(query, *args, **kwargs) as cursor:
                yield cursor
            return
        with self._in_given_transaction(query, *args, **kwargs) as cursor:
            yield cursor

    @contextlib.contextmanager
    @raise_database_error
    def _in_given_transaction(self, query: AnyStr, *args: Any, **kwargs: Any) -> Iterator[DBApiCursor]:
        """dlt's query, but an error rolls nothing back here: the owner's transaction is
        then aborted, and the owner rolls the whole run back."""
        assert isinstance(query, str)
        parameters = args or kwargs or None
        if parameters:
            query = query.replace("%s", "?")
        with reporting_aborts(self._conn):
            cursor = self._conn.execute(query, parameters)  # type: ignore[union-attr]
        yield self.cursor_impl(cursor)  # type: ignore[arg-type]


class FileSqlClient(_GivenConnection):
    """dlt's DuckDB SQL client on a DuckDB file's given connection."""


class _GivenConnectionClient(DuckDbClient):
    """dlt's DuckDB job client, loading through the SQL client `given_sql_client` (a
    :class:`_GivenConnection`) instead of dlt's own."""

    given_sql_client: type[_GivenConnection]

    def __init__(
        self, schema: Schema, config: DuckDbClientConfiguration, capabilities: DestinationCapabilitiesContext
    ) -> None:
        super().__init__(schema, config, capabilities)
        self.sql_client = self.given_sql_client(
            self.sql_client.dataset_name, self.sql_client.staging_dataset_name, config.credentials, capabilities
        )


class FileClient(_GivenConnectionClient):
    """dlt's DuckDB job client, loading through a :class:`FileSqlClient`."""

    given_sql_client = FileSqlClient


class DuckDbDestination(duckdb):
    """``dlt.destinations.duckdb`` that resolves its capabilities once per naming and
    loads through a :class:`FileSqlClient`."""

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

    @property
    def client_class(self) -> type[DuckDbClient]:
        return FileClient


class LakeSqlClient(_GivenConnection):
    """dlt's DuckDB SQL client whose names are qualified with an attached lake's catalog.

    Naming the catalog in every qualified name makes ``raw.<table>`` resolve in the lake
    whatever the session's default catalog (a duplicate of the connection, which dlt
    uses without a given one, starts in DuckDB's in-memory database)."""

    #: the lake's catalog in the connection dlt loads through: the alias of
    #: :func:`diligence.lake.connect`
    lake_catalog: ClassVar[str] = DEFAULT_ALIAS

    def catalog_name(self, quote: bool = True, casefold: bool = True) -> Optional[str]:
        name = self.capabilities.casefold_identifier(self.lake_catalog) if casefold else self.lake_catalog
        return self.capabilities.escape_identifier(name) if quote else name


class LakeClient(_GivenConnectionClient):
    """dlt's DuckDB job client, loading through a :class:`LakeSqlClient`."""

    given_sql_client = LakeSqlClient


class LakeDestination(DuckDbDestination):
    """:class:`DuckDbDestination` loading into the lake attached (as ``lake``) to the
    DuckDB connection it is given: every load job runs on that one connection, so a dlt
    run attaches the lake no more than once and commits one snapshot."""

    @property
    def client_class(self) -> type[DuckDbClient]:
        return LakeClient
