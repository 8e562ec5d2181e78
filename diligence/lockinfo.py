"""Who holds a warehouse's writer lock, read without ever taking it.

The writer lock (:func:`diligence.warehouse.writer_lock`) is an OS ``flock`` on
``<warehouse>.lock``, whose content is the holder's pid. Probing the lock by taking it,
even shared and for a moment, could make a sync that starts at that instant fail as
"busy"; so this module only looks: on Linux ``/proc/locks`` lists every held ``FLOCK``
with the file's inode, elsewhere the pid in the file must be a live process.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["lock_path", "lock_holder"]


def lock_path(warehouse: Path) -> Path:
    """The writer lock file of `warehouse`."""
    warehouse = Path(warehouse).expanduser().resolve()
    return warehouse.with_name(warehouse.name + ".lock")


def _pid_in(path: Path) -> int | None:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _flocked(path: Path) -> bool | None:
    """True/False from /proc/locks; None when the system has no such file."""
    try:
        stat = path.stat()
        table = Path("/proc/locks").read_text()
    except FileNotFoundError:
        return False if not path.exists() else None
    except OSError:
        return None
    inode = stat.st_ino
    for line in table.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF" (a "->" marks a waiter)
        if "FLOCK" not in parts or "->" in parts:
            continue
        device_inode = next((p for p in parts if p.count(":") == 2), "")
        if device_inode.rsplit(":", 1)[-1] == str(inode):
            return True
    return False


def process_alive(pid: int) -> bool:
    """Whether a process with `pid` exists (owned by anyone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_holder(warehouse: Path) -> int | None:
    """The pid of the process writing `warehouse` now, or None when nobody is."""
    path = lock_path(warehouse)
    pid = _pid_in(path)
    held = _flocked(path)
    if held is None:
        held = pid is not None and process_alive(pid)
    if not held:
        return None
    return pid if pid is not None else 0
