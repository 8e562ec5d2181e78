"""dlt's DuckDB destination, with its capabilities worked out once per pipeline.

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
"""

from __future__ import annotations

from typing import Any

from dlt.common.destination import DestinationCapabilitiesContext
from dlt.common.destination.reference import DestinationReference
from dlt.common.normalizers.naming import NamingConvention
from dlt.destinations import duckdb

__all__ = ["DuckDbDestination"]

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
