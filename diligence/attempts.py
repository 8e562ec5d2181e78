"""Sync attempts that failed before any namespace was recorded, kept for `status`.

A sync that cannot run at all (credentials refused, user-info failing, the service
unreachable, a missing setting) writes nothing into ``raw.sync_runs``: no namespace
got far enough. So that ``diligence status`` still says the last attempt failed, each
such failure is appended here, one JSON object a line, beside dlt's working folder of
the warehouse (owner-only, like that folder)::

    <warehouse dir>/.dlt-pipelines/<stem>/failed_attempts.jsonl
    {"at": "2026-11-23T06:00:01+00:00", "pid": 4242, "error": "login rejected; ..."}

Messages are the one-line errors the CLI prints (secrets masked); at most
:data:`KEEP` attempts are kept.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

from pipelines.secrets import redact

from .warehouse import pipelines_dir_of
from .warehouse.filemodes import write_text_atomically

__all__ = ["FailedAttempt", "KEEP", "record_failed_attempt", "failed_attempts"]

#: Failed attempts kept per warehouse (the oldest are dropped).
KEEP = 50
_FILE = "failed_attempts.jsonl"


@dataclass(frozen=True)
class FailedAttempt:
    """A sync that failed before any namespace outcome was recorded."""

    at: str
    pid: int
    error: str


def _path(warehouse: Path) -> Path:
    return pipelines_dir_of(Path(warehouse)) / _FILE


def record_failed_attempt(warehouse: Path, error: str, secrets: tuple[str, ...] = ()) -> None:
    """Append a failed attempt (its message masked); never raises."""
    try:
        attempt = FailedAttempt(
            at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
            pid=os.getpid(),
            error=" ".join(redact(error, secrets).split()),
        )
        kept = [asdict(a) for a in failed_attempts(warehouse)][-(KEEP - 1):]
        kept.append(asdict(attempt))
        write_text_atomically(_path(warehouse), "".join(json.dumps(a) + "\n" for a in kept))
    except OSError:  # recording must never hide the sync's own error
        pass


def failed_attempts(warehouse: Path) -> list[FailedAttempt]:
    """Recorded failed attempts, oldest first (none when the file is missing)."""
    path = _path(warehouse)
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    attempts = []
    for line in lines:
        try:
            data = json.loads(line)
            attempts.append(FailedAttempt(at=str(data["at"]), pid=int(data["pid"]), error=str(data["error"])))
        except (ValueError, KeyError, TypeError):
            continue
    return attempts
