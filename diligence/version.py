"""This release's version, as the package metadata says (``0.1.0`` in a checkout too)."""

from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError, version

__all__ = ["project_version"]


@functools.cache
def project_version() -> str:
    """The installed distribution's version, or ``unknown`` when it is not installed."""
    try:
        return version("diligence-warehouse")
    except PackageNotFoundError:
        return "unknown"
