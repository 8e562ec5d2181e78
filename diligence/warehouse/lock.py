"""The warehouse's writer lock: taking it, and seeing who holds it without taking it.

The writer lock (:func:`writer_lock`) is an OS ``flock`` on ``<warehouse>.lock``, whose
content is the holder's pid. Probing the lock by taking it,
even shared and for a moment, could make a sync that starts at that instant fail as
"busy"; so this module only looks: on Linux ``/proc/locks`` lists every held ``FLOCK``
with the file's inode, elsewhere the pid in the file must be a live process.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ..errors import WarehouseBusyError, WarehouseLocationError
from .filemodes import make_dirs, protect, protect_tree
from .paths import pipelines_dir_of, published_path, wal_of

__all__ = ["creating", "lock_holder", "lock_path", "mark_creating", "process_alive", "protect_outputs",
           "writer_lock"]


def lock_path(warehouse: Path) -> Path:
    """The writer lock file of `warehouse`."""
    warehouse = Path(warehouse).expanduser().resolve()
    return warehouse.with_name(warehouse.name + ".lock")


#: Written after the holder's pid in the lock file while its sync creates the warehouse.
CREATING = "creating"


def _lock_text(path: Path) -> list[str]:
    try:
        return path.read_text(errors="replace").split()
    except OSError:
        return []


def _pid_in(path: Path) -> int | None:
    words = _lock_text(path)
    return int(words[0]) if words and words[0].isdigit() else None


def mark_creating(warehouse: Path) -> None:
    """Say in the held lock file that its holder is creating `warehouse` (its first sync):
    ``diligence status`` then says so, since the file cannot be read meanwhile."""
    with contextlib.suppress(OSError):
        with lock_path(warehouse).open("a") as handle:
            handle.write(f" {CREATING}")


def creating(warehouse: Path) -> bool:
    """Whether the process holding `warehouse`'s lock is creating it (see :func:`mark_creating`)."""
    return CREATING in _lock_text(lock_path(warehouse))[1:]


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


#: Locks this process holds, per (warehouse, thread): nested steps reuse the lock.
_held: dict[tuple[Path, int], int] = {}
_held_guard = threading.Lock()


@contextlib.contextmanager
def writer_lock(warehouse: Path, *, wait_seconds: float = 0.0) -> Iterator[None]:
    """Hold the warehouse's writer lock (``<warehouse>.lock``) for a sync or a model build.

    A second writer waits up to `wait_seconds`, then raises :class:`WarehouseBusyError`
    naming the process that holds the lock. The lock is an OS file lock, so it is
    released when its holder dies, even by SIGKILL. Re-entrant within a thread: a
    step inside another step that holds the lock does not take it again.
    """
    warehouse = warehouse.expanduser().resolve()
    key = (warehouse, threading.get_ident())
    with _held_guard:
        nested = key in _held
        if nested:
            _held[key] += 1
    if nested:
        try:
            yield
        finally:
            with _held_guard:
                _held[key] -= 1
        return
    with _flock(warehouse, wait_seconds):
        with _held_guard:
            _held[key] = 1
        try:
            yield
        finally:
            with _held_guard:
                del _held[key]
            protect_outputs(warehouse)


def protect_outputs(warehouse: Path) -> None:
    """Give what the writers of `warehouse` wrote the configured modes (see
    :mod:`diligence.warehouse.filemodes`): DuckDB and dlt create their files with the umask's."""
    warehouse = warehouse.expanduser().resolve()
    protect(
        warehouse,
        wal_of(warehouse),
        published_path(warehouse),
    )
    protect_tree(pipelines_dir_of(warehouse))




@contextlib.contextmanager
def _flock(warehouse: Path, wait_seconds: float) -> Iterator[None]:
    """Hold ``<warehouse>.lock``; the file is removed on release, so none is ever stale.

    Removing it is safe: a writer that opened the file just before its holder removed
    it finds, once it has the lock, that the path no longer names its file, and takes
    the lock again on the new one.
    """
    lock_file = lock_path(warehouse)
    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            make_dirs(warehouse.parent)
            fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:  # a read-only or foreign folder: one line naming it
            reason = (exc.strerror or type(exc).__name__).lower()
            raise WarehouseLocationError(
                f"cannot write the warehouse {warehouse} in {warehouse.parent}: {reason}; "
                "choose a folder you may write (--warehouse, [warehouse] location)"
            ) from None
        try:
            _acquire(fd, warehouse, deadline)
        except BaseException:
            os.close(fd)
            raise
        try:
            current = os.stat(lock_file).st_ino
        except FileNotFoundError:
            current = None
        if current == os.fstat(fd).st_ino:
            break
        os.close(fd)  # locked a file its holder has removed: lock the new one
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_file)  # still held: no other writer can be using it
        os.close(fd)


def _acquire(fd: int, warehouse: Path, deadline: float) -> None:
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            if time.monotonic() >= deadline:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                raise WarehouseBusyError(
                    f"another sync is writing {warehouse} (pid {holder}); "
                    "try again when it has finished, or pass --wait SECONDS"
                ) from None
            time.sleep(0.2)
