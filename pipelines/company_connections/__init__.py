"""dlt source `company_connections`: every namespace of a user, landed faithfully.

The shape of a run::

    settings = resolve_settings()                       # one @configspec, resolved once
    with stream_namespaces(settings, staging_dir=folder) as stream:   # the fetch starts here
        pipeline = ...                                                    # prepared meanwhile
        for result in stream:
            pipeline.run(company_connections(result, sync_id=run_id), loader_file_format="parquet")

This module only names the package's public parts; each lives in a module of its own,
read top to bottom as the data flows:

* :mod:`.config`: :class:`SourceSettings` and :func:`resolve_settings`;
* :mod:`.client`: the service's HTTP client (auth, limits, retries, evidence);
* :mod:`.namespaces`: :func:`plan_namespaces`, which namespaces a sync reads;
* :mod:`.extract`: every namespace read side by side through one client, each
  handed over as a :data:`NamespaceResult` (:mod:`.results`) once complete;
* :mod:`.stream`: :func:`stream_namespaces`, that fetch on a background thread for
  synchronous callers (:class:`NamespaceStream`), and :func:`run_coroutine`;
* :mod:`.source`: :func:`company_connections`, the dlt source of one namespace's
  result, with its resources (:data:`DATA_RESOURCES`) and their raw tables
  (:mod:`.schema`: :data:`TABLE_COLUMNS`, :func:`arrow_schema`);
* :mod:`.evidence`: what the service said, kept and resumed from
  (:class:`EvidenceLog`, :class:`Kept`, :class:`ManifestIdentity`).
"""

from __future__ import annotations

from .config import SourceSettings, resolve_settings
from .evidence import EvidenceLog, Kept, ManifestIdentity
from .namespaces import plan_namespaces
from .results import NamespaceFailure, NamespaceResult, NamespaceSnapshot, ProgressListener
from .schema import TABLE_COLUMNS, arrow_schema
from .source import DATA_RESOURCES, company_connections, selected_rows
from .stream import NamespaceStream, run_coroutine, stream_namespaces

__all__ = [
    "company_connections",
    "stream_namespaces",
    "NamespaceStream",
    "resolve_settings",
    "run_coroutine",
    "SourceSettings",
    "NamespaceFailure",
    "NamespaceResult",
    "NamespaceSnapshot",
    "ProgressListener",
    "TABLE_COLUMNS",
    "DATA_RESOURCES",
    "selected_rows",
    "arrow_schema",
    "EvidenceLog",
    "Kept",
    "ManifestIdentity",
    "plan_namespaces",
]
