"""The verified checkpoint: what the last ``diligence verify`` that passed covered.

``syncs/VERIFIED`` names the last seal a verification passed at, the latest time a sync
sealed by then began (workers' syncs seal in any order), and the raw row versions per
table that were then at or before it (a sync begun by then and sealed later is not
counted: the verify after it checks its rows); its digest is the hash of those. The next sync records the checkpoint (seal and digest) in its manifest's header,
so the seal after it covers it. A later ``verify`` extends from it (see
:mod:`.verify`): it checks the chain, the responses and the rows that came after the
checkpoint's seal, counts the older row versions again against the checkpoint, and
checks a sample of the older rows against their responses; ``verify --full`` takes
nothing on trust.

What that proves: everything sealed since the checkpoint, exactly as a full verify would;
of what came before, that no row version was added or deleted (the counts) and that the
rows sampled are what their responses say. An older row edited in place outside the
sample is found by the next full verify, or by a sample that meets it.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import orjson

from pipelines.evidence.confined import is_sha256, is_sync_id, read_file, write_file

from ..warehouse.filemodes import modes as file_modes

__all__ = ["CHECKPOINT", "Checkpoint", "read_checkpoint", "recorded_checkpoint", "write_checkpoint"]

log = logging.getLogger("diligence.evidence")

CHECKPOINT = "VERIFIED"
_MAX_BYTES = 1 << 16


@dataclass(frozen=True)
class Checkpoint:
    """The last seal a verification passed at, and what it covered."""

    seal: str
    sync_id: str
    synced_at: str
    verified_at: str
    #: raw table -> row versions at or before the checkpoint's sync (None: not counted,
    #: a checkpoint given by hand with ``--since``)
    rows: dict[str, int] | None = None

    @property
    def digest(self) -> str:
        return hashlib.sha256(orjson.dumps(asdict(self), option=orjson.OPT_SORT_KEYS)).hexdigest()

    @property
    def time(self) -> datetime:
        when = datetime.fromisoformat(self.synced_at)
        return when if when.tzinfo else when.replace(tzinfo=timezone.utc)

    def record(self) -> dict[str, str]:
        """What the next sync's manifest records of it."""
        return {"seal": self.seal, "digest": self.digest}


def read_checkpoint(root: Path) -> Checkpoint | str | None:
    """The checkpoint of the store at `root`: None when there is none, a line when it is
    not one (it is then not used)."""
    try:
        body = read_file(root, ("syncs", CHECKPOINT), _MAX_BYTES)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"the verified checkpoint cannot be read: {exc}"
    try:
        found = orjson.loads(body)
        checkpoint = Checkpoint(**{k: found[k] for k in ("seal", "sync_id", "synced_at", "verified_at", "rows")})
        checkpoint.time  # noqa: B018 - a time it can be read as
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return f"syncs/{CHECKPOINT} is not a verified checkpoint: it is not used"
    rows = checkpoint.rows
    if not is_sha256(checkpoint.seal) or not is_sync_id(checkpoint.sync_id) or found.get("digest") != checkpoint.digest \
            or rows is not None and not all(isinstance(n, int) for n in rows.values()):
        return f"syncs/{CHECKPOINT} was edited: it does not hash to its digest, and is not used"
    return checkpoint


def write_checkpoint(root: Path, checkpoint: Checkpoint) -> None:
    """Keep `checkpoint` as the store's (a store this process may not write keeps the
    one it had: the next verify checks more)."""
    body = orjson.dumps({**asdict(checkpoint), "digest": checkpoint.digest}, option=orjson.OPT_INDENT_2)
    modes = file_modes()
    try:
        write_file(root, ("syncs", CHECKPOINT), body, mode=modes.file, folder_mode=modes.folder, sync=True)
    except OSError as exc:
        log.debug("the verified checkpoint was not kept in %s: %s", root, exc)


def recorded_checkpoint(root: Path | None) -> dict[str, Any] | None:
    """What a new manifest's header records of the store's checkpoint (None: none)."""
    found = read_checkpoint(root) if root is not None else None
    return found.record() if isinstance(found, Checkpoint) else None
