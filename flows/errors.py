"""Exceptions raised by the flow's tasks.

They are defined in, and belong to the one tree of, :mod:`diligence.errors` (root ``DiligenceError``, with
``transient``)::

    DiligenceError
    ├── NamespaceSyncError          (diligence.errors) a namespace could not be read completely
    ├── NamespacesNotLoadedError    (diligence.errors) namespaces another attempt of the sync
    │                               may load: Prefect retries ``sync-namespaces``
    └── FlowError                   base of the flow's own errors; never transient
        └── RunFailedError          what the result of a Failed run raises: names every
                                    namespace that was not loaded and every failing data check

`flows.retry` decides with :func:`flows.retry.is_transient` (their `transient`).
"""

from __future__ import annotations

from diligence.errors import FlowError, NamespacesNotLoadedError, NamespaceSyncError, RunFailedError

__all__ = ["FlowError", "NamespaceSyncError", "NamespacesNotLoadedError", "RunFailedError"]
