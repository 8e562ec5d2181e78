"""Which warehouse a command or flow works on: the location and data path from its
arguments, the environment or the config (:func:`warehouse_settings`, the one reader of
those settings), and the :class:`~diligence.warehouse.owner.Warehouse` they name
(:func:`open_warehouse`).
"""

from __future__ import annotations

from pathlib import Path

from ..config import (
    DATA_PATH_ENV,
    DEFAULT_WAREHOUSE,
    WAREHOUSE_ENV,
    evidence_enabled,
    evidence_path,
    settings,
)
from .location import is_lake_uri
from .migrate import require_readable
from .owner import Warehouse

__all__ = ["DATA_PATH_ENV", "WAREHOUSE_ENV", "open_warehouse", "warehouse_settings"]



def warehouse_settings(
    location: str | Path | None = None, data_path: str | Path | None = None
) -> tuple[str | Path, str | None]:
    """(location, data_path): each the argument, else its env var (``DILIGENCE_WAREHOUSE``,
    ``DILIGENCE_DATA_PATH``), else config ``[warehouse] location`` / ``data_path``, else
    ``data/warehouse.duckdb`` and no data path. The one reader of those settings."""
    configured = settings().warehouse  # the env vars win over dlt's config there
    location = location or configured.location or DEFAULT_WAREHOUSE
    if data_path or not is_lake_uri(location):
        # a configured data path belongs to a configured lake, not to a file given here
        return location, (str(data_path) if data_path else None)
    return location, configured.data_path


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
