"""The warehouse's lock: writers take it whole, readers share it, and anyone can see who
writes without taking it.

The lock is an OS ``flock`` on ``<warehouse>.lock``. A writer (:func:`writer_lock`: a
sync, a model build) holds it exclusively, and the file's content is its pid. A reader
of the file (:func:`reader_lock`: ``status``, ``export``, ``verify``, dbt's docs) holds
it shared while its DuckDB session is open. DuckDB lets no process open a file that
another has open to write, not even to read, so without this a reader that opened the
file between two steps of a sync (its load, its dbt build, its publish) would make the
sync's next step fail; with it, the reader is refused at once while a sync writes, and a
sync that starts while a reader reads waits for it (`READERS_GRACE_SECONDS`).

A writer waiting for readers puts its pid in the file first, and readers that come
meanwhile are refused as they are while it writes: a steady stream of ``status`` calls
cannot keep a sync waiting.

Seeing who writes (:func:`lock_holder`) only looks, never takes the lock (that could make
a sync starting at that instant wait): the pid in the file is the writer's if that
process has the file open (on Linux, by ``/proc/<pid>/fd``; elsewhere, if it is alive).

The lock file is opened without following a link (``O_NOFOLLOW``) and never truncated
when opened: a link, a FIFO or a file with other names (hard links) in its place is
refused with one line, so the lock never writes into another file. A process that holds
the lock but wrote no pid in it (not ours: ``flock -x <warehouse>.lock ...``) ends a
writer's wait after ``--wait`` and the readers' grace, with one line naming it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import WarehouseBusyError, WarehouseLocationError
from .filemodes import make_dirs, protect, protect_tree
from .paths import lock_of, pipelines_dir_of, published_path, wal_of

__all__ = ["being_written", "creating", "lock_holder", "lock_path", "mark_creating", "process_alive",
           "protect_outputs", "reader_lock", "writer_lock"]

#: How long a writer waits, beyond its own ``--wait``, for readers holding the lock
#: shared (``status``, ``export``, ``verify``) to finish.
READERS_GRACE_SECONDS = 30.0


def lock_path(warehouse: Path) -> Path:
    """The writer lock file of `warehouse`."""
    return lock_of(Path(warehouse).expanduser().resolve())


#: Written after the holder's pid in the lock file while its sync creates the warehouse.
CREATING = "creating"


#: how the lock file is opened: never through a link, never blocking on a FIFO
_OPEN = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _lock_text(path: Path) -> list[str]:
    try:
        fd = os.open(path, os.O_RDONLY | _OPEN)
    except OSError:
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        return os.pread(fd, 128, 0).decode(errors="replace").split()
    finally:
        os.close(fd)


def _pid_in(path: Path) -> int | None:
    words = _lock_text(path)
    return int(words[0]) if words and words[0].isdigit() else None


def mark_creating(warehouse: Path) -> None:
    """Say in the held lock file that its holder is creating `warehouse` (its first sync):
    ``diligence status`` then says so, since the file cannot be read meanwhile."""
    with contextlib.suppress(OSError):
        fd = os.open(lock_path(warehouse), os.O_WRONLY | os.O_APPEND | _OPEN)
        try:
            os.write(fd, f" {CREATING}".encode())
        finally:
            os.close(fd)


def creating(warehouse: Path) -> bool:
    """Whether the process holding `warehouse`'s lock is creating it (see :func:`mark_creating`)."""
    return CREATING in _lock_text(lock_path(warehouse))[1:]


def _flocks(path: Path) -> list[tuple[str, int]] | None:
    """The ``flock`` locks held on `path` (not those waited for): ``("WRITE", pid)`` or
    ``("READ", pid)`` each, from /proc/locks; None when the system has no such file."""
    try:
        stat = path.stat()
        table = Path("/proc/locks").read_text()
    except FileNotFoundError:
        return [] if not path.exists() else None
    except OSError:
        return None
    held = []
    for line in table.splitlines():
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF" (a "->" marks a waiter)
        if "FLOCK" not in parts or "->" in parts or len(parts) < 6:
            continue
        device_inode = next((p for p in parts if p.count(":") == 2), "")
        if device_inode.rsplit(":", 1)[-1] == str(stat.st_ino) and parts[4].isdigit():
            held.append((parts[3], int(parts[4])))
    return held


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
    """The pid of the process writing `warehouse` now (or waiting for its readers to let
    go), or None when nobody is."""
    return _writer_of(lock_path(warehouse))


def _writer_of(path: Path) -> int | None:
    """The pid in the lock file `path`, if that process has the file open (on Linux; a
    live process elsewhere): a writer holding the lock or waiting for readers. A killed
    writer's pid, even once reused, is nobody's."""
    pid = _pid_in(path)
    if pid is None or not process_alive(pid):
        return None
    try:
        wanted = path.stat()
    except FileNotFoundError:
        return None
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:  # no /proc (not Linux): its being alive must do; else it just ended
        return None if Path("/proc/self/fd").is_dir() else pid
    except OSError:  # another user's process
        return pid
    for fd in fds:
        with contextlib.suppress(OSError):
            opened = os.stat(f"/proc/{pid}/fd/{fd}")
            if (opened.st_ino, opened.st_dev) == (wanted.st_ino, wanted.st_dev):
                return pid
    return None


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

    def open_for_writing() -> int:
        try:
            make_dirs(warehouse.parent)
            return _checked(lock_file, os.open(lock_file, os.O_RDWR | os.O_CREAT | _OPEN, 0o600))
        except WarehouseLocationError:
            raise
        except OSError as exc:  # a read-only or foreign folder, a link: one line naming it
            if exc.errno == errno.ELOOP:
                raise _refused(lock_file, "a symbolic link") from None
            reason = (exc.strerror or type(exc).__name__).lower()
            raise WarehouseLocationError(
                f"cannot write the warehouse {warehouse} in {warehouse.parent}: {reason}; "
                "choose a folder you may write (--warehouse, [warehouse] location)"
            ) from None

    fd = _lock_named(lock_file, open_for_writing, lambda fd: _acquire(fd, warehouse, deadline))
    assert fd is not None  # open_for_writing raises rather than give none
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_file)  # still held: no other writer can be using it
        os.close(fd)


def _refused(lock_file: Path, what: str) -> WarehouseLocationError:
    return WarehouseLocationError(
        f"the lock file {lock_file} is {what}: a lock is never written through it; remove it "
        "(no diligence process is using it) and try again")


def _checked(lock_file: Path, fd: int) -> int:
    """`fd` if it is a regular file with no other name (no hard link); else it is
    closed and the lock file refused."""
    found = os.fstat(fd)
    what = None if stat.S_ISREG(found.st_mode) else "not a regular file"
    if what is None and found.st_nlink > 1:
        what = f"a file with {found.st_nlink} names (hard links)"
    if what is not None:
        os.close(fd)
        raise _refused(lock_file, what)
    return fd


def _acquire(fd: int, warehouse: Path, deadline: float) -> None:
    """Take the lock of `fd` exclusively by `deadline`, or later while only readers hold
    it (up to `READERS_GRACE_SECONDS` more: theirs are short reads). Waiting for readers,
    the writer puts its pid in the file: readers that come meanwhile are refused, so a
    steady stream of them cannot keep it waiting."""
    grace = deadline + READERS_GRACE_SECONDS
    started = time.monotonic()
    path = lock_path(warehouse)
    marked = False
    try:
        while True:
            if _try_flock(fd, fcntl.LOCK_EX):
                return
            flocks = _flocks(path)
            strangers: list[int] = []
            if flocks is None:  # no /proc/locks: a live pid in the file is a writer's
                writer = _writer_of(path)
                writing = writer is not None and writer != os.getpid()
                readers = [] if writing else ["another process"]
            else:
                # a writer holds it: the exclusive lock of the pid in the file (a reader
                # removing the file holds it exclusively for an instant, with no pid of its own)
                named = _pid_in(path)
                writing = any(kind == "WRITE" and pid == named for kind, pid in flocks)
                readers = [f"process {pid}" for pid in sorted({pid for kind, pid in flocks if kind == "READ"})]
                strangers = sorted({pid for kind, pid in flocks
                                    if kind == "WRITE" and pid not in (named, os.getpid())})
            if readers and not writing and not marked:
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
                marked = True
            now = time.monotonic()
            if now >= deadline and writing:
                holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                raise WarehouseBusyError(
                    f"another sync is writing {warehouse} (pid {holder}); "
                    "try again when it has finished, or pass --wait SECONDS"
                )
            if now >= grace and readers:
                raise WarehouseBusyError(
                    f"{warehouse} is being read by {', '.join(readers)} "
                    f"(diligence status, export or verify) for over {READERS_GRACE_SECONDS:.0f} s; "
                    "try again when it has finished, or pass --wait SECONDS"
                )
            if now >= grace and strangers and not writing:
                raise WarehouseBusyError(
                    f"{warehouse} is locked by an unknown process ({', '.join(f'pid {p}' for p in strangers)}: "
                    f"it holds {path} but wrote no pid in it, so it is no diligence sync) for over "
                    f"{now - started:.0f} s; stop it, or pass --wait SECONDS")
            time.sleep(0.2)
    except BaseException:
        if marked and _pid_in(path) == os.getpid():
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
        raise


def being_written(warehouse: Path, pid: int | None) -> WarehouseBusyError:
    """The one line for a reader of `warehouse` while the sync `pid` writes it."""
    return WarehouseBusyError(
        f"{warehouse} is being written by diligence sync (pid {pid or 'unknown'}); query the analysts' "
        f"copy {published_path(warehouse)}, or try again when the sync has finished"
    )


@contextlib.contextmanager
def reader_lock(warehouse: Path) -> Iterator[None]:
    """Hold `warehouse`'s lock shared while this process reads the file (see the module
    docstring); raises :func:`being_written` at once while a sync writes it.

    Nothing is held when this process writes the warehouse itself (its steps read
    through their own session), or when the lock file cannot be opened (a folder the
    reader may not write, with no lock file in it): the reader then opens the file as
    before, and DuckDB's own lock decides.
    """
    warehouse = warehouse.expanduser().resolve()
    with _held_guard:
        writing_here = any(path == warehouse for path, _ in _held)
    if writing_here:
        yield
        return
    lock_file = lock_path(warehouse)
    fd = _lock_named(lock_file, lambda: _open_shared(lock_file), lambda fd: _take_shared(fd, lock_file, warehouse))
    if fd is None:
        yield
        return
    try:
        yield
    finally:
        # the last one out removes the file, as a writer does (see _flock); if another
        # reader or a writer holds it now, it is theirs to remove
        with contextlib.suppress(OSError):
            if _try_flock(fd, fcntl.LOCK_EX) and _names(lock_file, fd) and _pid_in(lock_file) is None:
                lock_file.unlink()
        os.close(fd)


def _take_shared(fd: int, lock_file: Path, warehouse: Path) -> None:
    """Take the lock of `fd` shared, or raise :func:`being_written` when a writer holds
    it or waits for it (its pid is in the file). Held exclusively with no pid in the
    file, it is a reader removing the file, for an instant: try again."""
    settle = time.monotonic() + 1.0
    while True:
        writer = _writer_of(lock_file)
        if writer is not None and writer != os.getpid():
            raise being_written(warehouse, writer)  # a writer holds it, or waits for readers
        if _try_flock(fd, fcntl.LOCK_SH):
            return
        writer = _pid_in(lock_file)
        if writer is not None or time.monotonic() >= settle:
            raise being_written(warehouse, writer)
        time.sleep(0.01)


def _lock_named(lock_file: Path, open_file: Callable[[], int | None], take: Callable[[int], None]) -> int | None:
    """Open `lock_file` and lock it with `take`; again, on the new file, when its holder
    removed it meanwhile (the lock of a removed file excludes no one). None when
    `open_file` gives none."""
    while True:
        fd = open_file()
        if fd is None:
            return None
        try:
            take(fd)
        except BaseException:
            os.close(fd)
            raise
        if _names(lock_file, fd):
            return fd
        os.close(fd)


def _try_flock(fd: int, operation: int) -> bool:
    """Take the lock of `fd` (`operation`: ``LOCK_EX`` or ``LOCK_SH``) if no one else
    holds it in a way that excludes it; False if someone does."""
    try:
        fcntl.flock(fd, operation | fcntl.LOCK_NB)
        return True
    except OSError as exc:
        if exc.errno not in (errno.EAGAIN, errno.EACCES):
            raise
        return False


def _open_shared(lock_file: Path) -> int | None:
    """The lock file opened for a reader (created if missing, never through a link);
    None when it cannot be opened, or is not a regular file of one name (no lock is
    taken then: DuckDB's own lock decides)."""
    for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
        try:
            fd = os.open(lock_file, flags | _OPEN, 0o600)
        except OSError:
            continue
        found = os.fstat(fd)
        if stat.S_ISREG(found.st_mode) and found.st_nlink == 1:
            return fd
        os.close(fd)
        return None
    return None


def _names(lock_file: Path, fd: int) -> bool:
    """Whether `lock_file` still names the file open as `fd`."""
    try:
        return os.stat(lock_file).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False
