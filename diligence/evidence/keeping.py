"""Where a step of the warehouse keeps its evidence, and the log it keeps it in.

A sync (and a documents download, and a replay) writes one manifest into the
warehouse's evidence store (:attr:`diligence.warehouse.Warehouse.evidence_root`); its
header says whose it is: base URL, account digest, warehouse, ``--select``, schema and
project version (:class:`~pipelines.company_connections.ManifestIdentity`), and the
store's verified checkpoint, if any (:mod:`.checkpoint`: the seal covers it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pipelines.company_connections import EvidenceLog, Kept, ManifestIdentity
from pipelines.evidence.store import FileModes

from ..version import project_version
from ..warehouse import Warehouse
from ..warehouse.filemodes import modes
from .bucket import EvidenceBucket
from .checkpoint import recorded_checkpoint

__all__ = ["evidence_log", "file_modes", "manifest_identity"]


def file_modes() -> FileModes:
    """The evidence store's file modes: the warehouse's (``[warehouse] file_mode``)."""
    configured = modes()
    return FileModes(configured.file, configured.folder)


def manifest_identity(owner: Warehouse, settings: Any, resources: tuple[str, ...] | None) -> ManifestIdentity:
    """What `owner`'s sync with `settings` writes in its manifest's header."""
    warehouse = str(owner.path.resolve()) if owner.path is not None else owner.display()
    return ManifestIdentity.of(settings.base_url, settings.email, resources, warehouse)


def evidence_log(owner: Warehouse, settings: Any, *, sync_id: str, synced_at: datetime,
                 resources: tuple[str, ...] | None = None, kept: Kept | None = None,
                 kind: str = "sync", extra: dict[str, Any] | None = None,
                 bucket: EvidenceBucket | None = None) -> EvidenceLog | None:
    """The evidence log of one step of `owner` (``kind``: ``sync``, ``documents`` or
    ``replay``), or None when the warehouse keeps no evidence. With `bucket` (the store's,
    see :func:`~diligence.evidence.bucket.kept_in_step`) its manifest is sealed under the
    bucket's lock."""
    root = owner.evidence_root
    if root is None:
        return None
    verified = recorded_checkpoint(root)  # sealed with this manifest: the checkpoint is covered
    extra = {**(extra or {}), **({"verified": verified} if verified else {})}
    return EvidenceLog.start(root, manifest_identity(owner, settings, resources), sync_id=sync_id,
                             started_at=synced_at, synced_at=synced_at, version=project_version(),
                             kept=kept, kind=kind, extra=extra, modes=file_modes(),
                             chain_lock=bucket.chain_lock if bucket is not None else None)
