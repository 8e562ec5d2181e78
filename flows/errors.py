"""Exceptions raised by the flow's tasks.

They are defined in, and belong to the one tree of, :mod:`diligence.errors` (root ``DiligenceError``, with
``transient``)::

    DiligenceError
    ├── NamespaceSyncError          (diligence.errors) a namespace could not be read completely
    └── FlowError                   base of the flow's own errors; never transient
        └── RunFailedError          raised as the run's last step: names every namespace
                                    that was not loaded and every failing data check

`flows.retry` decides with :func:`flows.retry.is_transient` (their `transient`).
"""

from __future__ import annotations

from diligence.errors import FlowError, NamespaceSyncError, RunFailedError

__all__ = ["FlowError", "NamespaceSyncError", "RunFailedError"]


