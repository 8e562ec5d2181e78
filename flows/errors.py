"""Exceptions raised by the flow's tasks.

They belong to the one tree of :mod:`diligence.errors` (root ``DiligenceError``, with
``transient``)::

    DiligenceError
    ├── NamespaceSyncError          (diligence.errors) a namespace could not be read
    │   └── UnknownNamespaceError   completely / user-info does not list it
    └── FlowError                   base of the flow's own errors; never transient
        └── RunFailedError          raised as the run's last step: names every namespace
                                    that was not loaded and every failing data check

`flows.retry` decides with :func:`diligence.errors.is_transient`.
"""

from __future__ import annotations

from diligence.errors import DiligenceError, NamespaceSyncError, UnknownNamespaceError

__all__ = ["FlowError", "NamespaceSyncError", "RunFailedError", "UnknownNamespaceError"]


class FlowError(DiligenceError):
    """Base class of the flow's own exceptions."""

    transient = False


class RunFailedError(FlowError):
    """The run finished its steps, but a namespace was not loaded or a check failed."""
