"""`diligence sync --select documents,questionnaires`: load only some resources.

The fetch still reads each namespace's snapshot (questionnaires and documents are only
reachable through the connections), but only the selected data resources are given to
dlt (see :func:`pipelines.company_connections.company_connections`): the others get
no merge at all, so none of their rows is deleted and none of their versions retired.
The run log (``sync_runs``, ``sync_issues``) is always loaded.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import SelectError

__all__ = ["SelectError", "resource_names", "parse_select"]


def resource_names() -> tuple[str, ...]:
    """The data resources a sync can select, in load order."""
    from pipelines.company_connections.schema import (  # start-up (dlt 0.9 s of imports): loads dlt
        NAMESPACE_TABLES,
        WHOLE_RUN_ONLY,
    )

    return tuple(name for name in NAMESPACE_TABLES if name not in WHOLE_RUN_ONLY)


def parse_select(values: Sequence[str] | None) -> tuple[str, ...] | None:
    """Resource names from ``--select`` values (comma-separated, repeatable); None: all.

    Raises :class:`SelectError` naming the unknown ones and listing the valid names.
    """
    if not values:
        return None
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    valid = resource_names()
    unknown = [name for name in dict.fromkeys(names) if name not in valid]
    if unknown or not names:
        what = ", ".join(unknown) if unknown else "nothing"
        raise SelectError(f"--select {what}: unknown resource; choose from {', '.join(valid)}")
    return tuple(name for name in valid if name in names)
