"""Names and files that come from outside: an evidence store, a bucket, a pack.

Whoever can write an evidence store (or the bucket it lives in, or an auditor's pack)
chooses its file names, their contents and what kind of file each one is. So here:

* every name read from such a place (an object key, a sync id, a hash) is checked
  against its exact grammar before it is used (:func:`check_sha256`,
  :func:`check_sync_id`, :func:`store_parts`), and is never joined to a path otherwise;
* every file is reached from its folder one component at a time, never through a
  symbolic link (``O_NOFOLLOW`` at each step), and read only if it is a regular file:
  a link, a FIFO or a device is an :class:`~.errors.EvidenceFileError` naming it, and
  opening never blocks (``O_NONBLOCK``);
* every read and decompression is streamed and stops at a size known before it starts
  (:func:`read_file`, :func:`gunzip_file`, :func:`gunzip_digest`): what a store holds
  never decides how much memory a reader takes;
* every write goes through :func:`write_file`, which creates the missing folders inside
  its root and the file under a temporary name beside its place, both by their file
  descriptors, so that no link planted in the store can send a write elsewhere.

The models: Python's ``tarfile`` data filter (PEP 706), git's path checks before it
writes a checkout, and restic's ``check --read-data``. The root itself is the user's
choice (it may be a link the user made); what is below it is the store's.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import re
import stat
import zlib
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from .errors import EvidenceFileError

__all__ = [
    "SHA256",
    "SYNC_ID",
    "check_sha256",
    "check_sync_id",
    "gunzip_digest",
    "gunzip_file",
    "is_sha256",
    "is_sync_id",
    "listing",
    "make_folder",
    "make_folders",
    "open_file",
    "open_folder",
    "read_file",
    "remove_file",
    "shown",
    "store_parts",
    "write_file",
    "write_in",
    "write_new",
]

#: a response's, an entries table's or a manifest's hash: 64 lower-case hex digits
SHA256 = re.compile(r"[0-9a-f]{64}")
#: a sync's id (``20261126T173518945208Z``), a documents download's or a prune's
SYNC_ID = re.compile(r"(?:documents-|prune-)?[0-9]{8}T[0-9]{12}Z")
#: the files of a store, relative to its root (a bucket's keys after its prefix)
_STORE_FILE = re.compile(
    r"(?P<folder>responses|entries)/(?P<fan>[0-9a-f]{2})/(?P<sha>[0-9a-f]{64})\.gz"
    rf"|syncs/(?P<sync>{SYNC_ID.pattern})\.manifest(?:\.gz)?"
    r"|syncs/HEAD")
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FOLDER = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_CHUNK = 1 << 20


def is_sha256(value: object) -> bool:
    return isinstance(value, str) and SHA256.fullmatch(value) is not None


def is_sync_id(value: object) -> bool:
    return isinstance(value, str) and SYNC_ID.fullmatch(value) is not None


def check_sha256(value: object, what: str = "hash") -> str:
    """`value` if it is a SHA-256 in hex, else :class:`EvidenceFileError` naming it."""
    if not is_sha256(value):
        raise EvidenceFileError(f"{what} {shown(value)} is not a SHA-256 (64 lower-case hex digits)")
    return value  # type: ignore[return-value]


def check_sync_id(value: object, what: str = "sync id") -> str:
    """`value` if it is a sync id (``20261126T173518945208Z``, ``documents-…``,
    ``prune-…``), else :class:`EvidenceFileError` naming it."""
    if not is_sync_id(value):
        raise EvidenceFileError(f"{what} {shown(value)} is not a sync id (like 20261126T173518945208Z)")
    return value  # type: ignore[return-value]


def store_parts(relative: str) -> tuple[str, ...]:
    """The components of a store file's path relative to the store (``responses/ab/
    <sha>.gz``, ``entries/ab/<sha>.gz``, ``syncs/<sync id>.manifest[.gz]``,
    ``syncs/HEAD``): checked against the store's layout, else
    :class:`EvidenceFileError`."""
    match = _STORE_FILE.fullmatch(relative)
    if match is None or (match["sha"] is not None and not match["sha"].startswith(match["fan"])):
        raise EvidenceFileError(f"{shown(relative)} is not a name the evidence store's layout allows")
    return tuple(relative.split("/"))


def shown(value: object) -> str:
    """A name from outside, safe to show in one line: as it is when it is printable
    text, else its ``repr`` (control characters escaped); cut at 90 characters."""
    text = value if isinstance(value, str) and value.isprintable() and value.strip() == value else repr(value)
    return text if len(text) <= 90 else text[:87] + "..."


def _checked(parts: Sequence[str]) -> Sequence[str]:
    for part in parts:
        if not part or part in (".", "..") or "/" in part or "\x00" in part:
            raise EvidenceFileError(f"{shown(part)} is not a file name")
    return parts


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a regular file"


def _refused(folder: int, name: str, shown: str, exc: OSError) -> EvidenceFileError:
    """Why `name` in `folder` could not be opened, as the rule it broke."""
    with contextlib.suppress(OSError):
        mode = os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode
        if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
            return EvidenceFileError(f"{shown} is {_kind(mode)}: not read")
    return EvidenceFileError(f"{shown} cannot be read: {exc.strerror or exc}")


@contextlib.contextmanager
def _folder(root: Path, parts: Sequence[str], *, create: int | None = None) -> Iterator[int]:
    """The folder `root`/`parts` opened component by component, never through a link
    (`create`: the mode of the folders that are missing, made here, `root` included)."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError:
        if create is None:
            raise
        make_folders(root, create)
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for index, part in enumerate(_checked(parts)):
            made = False
            if create is not None:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, create, dir_fd=fd)
                    made = True
            try:
                following = os.open(part, _FOLDER, dir_fd=fd)
            except FileNotFoundError:
                raise
            except OSError as exc:
                raise _refused(fd, part, "/".join(parts[: index + 1]), exc) from None
            if made:
                os.fchmod(following, create)  # type: ignore[arg-type]  # whatever the umask
            os.close(fd)
            fd = following
        yield fd
    finally:
        os.close(fd)


def make_folders(path: Path, mode: int) -> Path:
    """Create the folder `path` and its missing parents, each made here with `mode`
    (whatever the umask). A folder that exists is left as it is: no mode of a folder
    this process did not create is ever changed. Returns `path`."""
    path = Path(path)
    missing: list[Path] = []
    current = path
    while not os.path.lexists(current) and current != current.parent:
        missing.append(current)
        current = current.parent
    for folder in reversed(missing):
        try:
            os.mkdir(folder, mode)
        except FileExistsError:
            continue  # made meanwhile by another process: theirs
        fd = os.open(folder, _FOLDER)
        try:
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    if not path.is_dir():
        raise NotADirectoryError(f"{path} is not a folder")
    return path


def _open_regular(root: Path, parts: Sequence[str]) -> int:
    """A file below `root` opened for reading (see the module docstring)."""
    *folders, name = _checked(parts)
    shown = "/".join(parts)
    with _folder(root, folders) as folder:
        try:
            fd = os.open(name, _READ, dir_fd=folder)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise _refused(folder, name, shown, exc) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise EvidenceFileError(f"{shown} is {_kind(mode)}: not read")
    return fd


def open_file(root: Path, parts: Sequence[str]) -> BinaryIO:
    """The regular file `root`/`parts`, opened for reading (see the module docstring).
    FileNotFoundError when it is not there."""
    return os.fdopen(_open_regular(root, parts), "rb", buffering=1 << 20)


def read_file(root: Path, parts: Sequence[str], limit: int) -> bytes:
    """The bytes of the regular file `root`/`parts`, at most `limit` of them (more:
    :class:`EvidenceFileError`). FileNotFoundError when it is not there."""
    fd = _open_regular(root, parts)
    with os.fdopen(fd, "rb", buffering=0) as file:
        data = file.read(limit + 1)
    if len(data) > limit:
        raise EvidenceFileError(f"{'/'.join(parts)} holds more than {limit:,} bytes: not read")
    return data


def _gunzip(root: Path, parts: Sequence[str], limit: int) -> Iterator[bytes]:
    """The decompressed bytes of a gzip file, in pieces, stopping with
    :class:`EvidenceFileError` once they would pass `limit` (a gzip bomb stops there)."""
    shown = "/".join(parts)
    fd = _open_regular(root, parts)
    with os.fdopen(fd, "rb", buffering=0) as file:
        inflater = zlib.decompressobj(wbits=31)
        total = 0
        pending = b""
        while True:
            if not pending and not (pending := file.read(_CHUNK)):
                break
            piece = inflater.decompress(pending, min(_CHUNK, limit + 1 - total))
            pending = inflater.unconsumed_tail
            total += len(piece)
            if total > limit:
                raise EvidenceFileError(f"{shown} decompresses to more than {limit:,} bytes: not read")
            if piece:
                yield piece
            if inflater.eof:  # the end of a gzip member: another may follow
                pending = inflater.unused_data
                inflater = zlib.decompressobj(wbits=31)
                if not pending and not (pending := file.read(_CHUNK)):
                    return
        raise EvidenceFileError(f"{shown} is cut short: its gzip data ends early")


def gunzip_file(root: Path, parts: Sequence[str], limit: int) -> bytes:
    """The decompressed bytes of the gzip file `root`/`parts`, at most `limit` (more,
    or not gzip: :class:`EvidenceFileError`)."""
    try:
        return b"".join(_gunzip(root, parts, limit))
    except zlib.error as exc:
        raise EvidenceFileError(f"{'/'.join(parts)} does not decompress: {exc}") from None


def gunzip_digest(root: Path, parts: Sequence[str], limit: int) -> tuple[str, int]:
    """(SHA-256, size) of the decompressed bytes of the gzip file `root`/`parts`,
    hashed as they are decompressed (nothing is held), stopping past `limit`."""
    digest = hashlib.sha256()
    size = 0
    try:
        for piece in _gunzip(root, parts, limit):
            digest.update(piece)
            size += len(piece)
    except zlib.error as exc:
        raise EvidenceFileError(f"{'/'.join(parts)} does not decompress: {exc}") from None
    return digest.hexdigest(), size


def make_folder(root: Path, parts: Sequence[str], mode: int) -> None:
    """Create the folders `root`/`parts` that are missing, `root` included, each with
    `mode` (whatever the umask); an existing one is left as it is, and none below `root`
    is reached through a link."""
    with _folder(root, parts, create=mode):
        pass


def open_folder(root: Path, parts: Sequence[str], *, mode: int) -> int:
    """The folder `root`/`parts` opened (created as in :func:`make_folder`, reached
    without links): a descriptor the caller closes, for writing many files into it
    with :func:`write_in`."""
    with _folder(root, parts, create=mode) as folder:
        return os.dup(folder)


_temporaries = itertools.count()


def write_in(folder: int, name: str, data: bytes | Iterable[bytes], *, mode: int, replace: bool = True,
             sync: bool = False, limit: int | None = None, shown: str | None = None) -> bool:
    """Write `data` (bytes, or pieces of them) to `name` in the open `folder`: into a
    new temporary file beside it (never through a link), then renamed into place in
    one step. `replace` False keeps a file already there (returns False then); `sync`
    makes it durable (the file and the rename) before it returns; past `limit` bytes
    nothing is written (:class:`EvidenceFileError`, naming the file as `shown`)."""
    _checked([name])
    if not replace:
        with contextlib.suppress(FileNotFoundError):
            os.stat(name, dir_fd=folder, follow_symlinks=False)
            return False
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:  # a name of this process's own: one a killed process of the same pid left is skipped
        temporary = f".{name}.{os.getpid()}-{next(_temporaries)}.tmp"
        try:
            fd = os.open(temporary, flags, mode, dir_fd=folder)
            break
        except FileExistsError:
            continue
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb", closefd=False) as handle:
            written = 0
            for piece in [data] if isinstance(data, bytes | bytearray) else data:
                written += len(piece)
                if limit is not None and written > limit:
                    raise EvidenceFileError(f"{shown or name} would hold more than {limit:,} bytes: not written")
                handle.write(piece)
            handle.flush()
            if sync:
                os.fsync(fd)
        os.close(fd)
        fd = -1
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
        raise
    if sync:
        os.fsync(folder)
    return True


def write_new(folder: int, name: str, data: bytes, *, mode: int, sync: bool = False) -> bool:
    """Write `data` as the new file `name` in the open `folder`, appearing whole or not
    at all; False when a file of that name is there already (it is kept). An unnamed
    file (``O_TMPFILE``) linked into place: one new name in the folder, not a temporary
    one and a rename (where the system cannot, :func:`write_in`)."""
    _checked([name])
    try:
        fd = os.open(".", os.O_WRONLY | os.O_TMPFILE | os.O_CLOEXEC, mode, dir_fd=folder)
    except OSError:  # no O_TMPFILE on this system or file system
        return write_in(folder, name, data, mode=mode, replace=False, sync=sync)
    try:
        os.fchmod(fd, mode)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
        try:
            os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=folder)
        except FileExistsError:
            return False
    finally:
        os.close(fd)
    if sync:
        os.fsync(folder)
    return True


def write_file(root: Path, parts: Sequence[str], data: bytes | Iterable[bytes], *, mode: int, folder_mode: int,
               replace: bool = True, sync: bool = False, limit: int | None = None) -> bool:
    """Write `data` to `root`/`parts` (see :func:`write_in`), creating the missing
    folders inside `root`."""
    *folders, name = _checked(parts)
    with _folder(root, folders, create=folder_mode) as folder:
        return write_in(folder, name, data, mode=mode, replace=replace, sync=sync, limit=limit,
                        shown="/".join(parts))


def remove_file(root: Path, parts: Sequence[str]) -> bool:
    """Remove `root`/`parts` (a link is removed itself, never followed); False when
    it was not there."""
    *folders, name = _checked(parts)
    try:
        with _folder(root, folders) as folder:
            os.unlink(name, dir_fd=folder)
    except FileNotFoundError:
        return False
    return True


def listing(root: Path, parts: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(name, kind) of each entry of the folder `root`/`parts`, in name order, without
    following links: kind is ``file``, ``folder`` or what else it is (``a symbolic
    link``, ``a FIFO``, ...). Empty when the folder is not there."""
    try:
        with _folder(root, parts) as folder:
            found = []
            with os.scandir(folder) as entries:
                for entry in entries:
                    mode = entry.stat(follow_symlinks=False).st_mode
                    kind = "file" if stat.S_ISREG(mode) else "folder" if stat.S_ISDIR(mode) else _kind(mode)
                    found.append((entry.name, kind))
    except FileNotFoundError:
        return []
    return sorted(found)
