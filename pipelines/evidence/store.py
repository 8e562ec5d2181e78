"""The evidence store's responses: every body the service sent, kept once, by its hash.

::

    <store>/responses/<first 2 hex>/<sha256>.gz     the exact bytes received (after
                                                    transfer decoding), gzip-compressed
    <store>/syncs/                                  the manifests (see :mod:`.manifest`)
    <store>/entries/<first 2 hex>/<sha256>.gz       a sealed manifest's table of entries

A body is addressed by the SHA-256 of its bytes, so the same answer seen by a hundred
syncs is stored once. A file is written to a temporary name beside its place and renamed
into it, so a reader never sees half of one; an existing file is never written again.
Files and folders get the store's :class:`FileModes` from their first byte, whatever the
umask (owner-only by default). Nothing here knows what the bytes mean.

Whoever can write the store chooses what is in it: every name is checked against its
grammar, every file is reached without following a link and read only if it is a
regular file, and every decompression stops at the size a manifest records for it (or
:data:`MAX_BODY`, or :data:`MAX_TABLE` for an entries table); see :mod:`.confined`.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from .confined import (
    check_sha256,
    gunzip_digest,
    gunzip_file,
    is_sha256,
    listing,
    make_folders,
    open_folder,
    shown,
    write_new,
)

__all__ = ["MAX_BODY", "MAX_TABLE", "FileModes", "ResponseStore", "StoredResponse", "body_sha256",
           "make_folder", "new_file"]

RESPONSES = "responses"
SYNCS = "syncs"
ENTRIES = "entries"
SUFFIX = ".gz"
#: gzip's level: JSON compresses to about a fifth at level 6, a level that costs a small
#: share of a request's time on the fetch thread
LEVEL = 6
#: the most a stored response may decompress to when no manifest records its size (the
#: client's default ``max_response_bytes``: no larger answer is ever kept)
MAX_BODY = 64 << 20
#: the most a sealed manifest's table of entries, or a sealed manifest, may decompress
#: to (a sync of about a million requests)
MAX_TABLE = 256 << 20


@dataclass(frozen=True)
class FileModes:
    """The modes of the files and folders of an evidence store (default: owner-only)."""

    file: int = 0o600
    folder: int = 0o700


def make_folder(folder: Path, modes: FileModes) -> Path:
    """Create `folder` and its missing parents with the folder mode, whatever the umask
    (an existing folder keeps its mode)."""
    return make_folders(folder, modes.folder)


def new_file(path: Path, modes: FileModes, *, append: bool = False) -> int:
    """Open `path` for writing with the file mode from its first byte (a new file, never
    through a symlink; `append`: an existing one is appended to)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | (os.O_APPEND if append else os.O_EXCL)
    fd = os.open(path, flags, modes.file)
    os.fchmod(fd, modes.file)
    return fd


def body_sha256(body: bytes) -> str:
    """The address of `body`: the hex SHA-256 of its bytes."""
    return hashlib.sha256(body).hexdigest()


@dataclass(frozen=True)
class StoredResponse:
    """A file of the store: the hash it is named by, and where it is."""

    sha256: str
    path: Path


class ResponseStore:
    """The responses of one evidence store (`root`), created owner-only on first write
    (`folder`: ``responses``; the sealed manifests' entry tables live the same way in
    ``entries``)."""

    def __init__(self, root: Path, folder: str = RESPONSES, modes: FileModes | None = None) -> None:
        self.root = Path(root)
        self.folder = folder
        self.modes = modes or FileModes()
        #: the folders written into, kept open (each file then costs a few system calls,
        #: each a moment the fetch thread lets others run); see :meth:`close`
        self._open: dict[str, int] = {}
        self._opening = threading.Lock()

    @property
    def responses(self) -> Path:
        return self.root / self.folder

    @property
    def syncs(self) -> Path:
        return self.root / SYNCS

    def parts(self, sha256: str) -> tuple[str, str, str]:
        """The file of `sha256` below the store's root (the hash checked first)."""
        check_sha256(sha256)
        return (self.folder, sha256[:2], f"{sha256}{SUFFIX}")

    def path(self, sha256: str) -> Path:
        return self.root.joinpath(*self.parts(sha256))

    def put(self, body: bytes, *, sync: bool = False) -> str:
        """Keep `body` (once: a body already kept is not written again); its sha256.
        `sync`: durable before it returns."""
        sha = body_sha256(body)
        folder, fan, name = self.parts(sha)
        with self._opening:
            handle = self._open.get(fan)
            if handle is None:
                handle = self._open[fan] = open_folder(self.root, (folder, fan), mode=self.modes.folder)
        try:
            os.stat(name, dir_fd=handle, follow_symlinks=False)
        except FileNotFoundError:
            write_new(handle, name, gzip.compress(body, compresslevel=LEVEL, mtime=0), mode=self.modes.file,
                      sync=sync)
        return sha

    def close(self) -> None:
        """Close the folders :meth:`put` kept open (it opens them again if called)."""
        with self._opening:
            for handle in self._open.values():
                os.close(handle)
            self._open.clear()

    def has(self, sha256: str) -> bool:
        return os.path.isfile(self.path(sha256)) and not os.path.islink(self.path(sha256))

    def get(self, sha256: str, size: int | None = None) -> bytes:
        """The bytes kept under `sha256`, decompressing at most `size` bytes (what its
        manifest entry records; else :data:`MAX_BODY`). FileNotFoundError: not kept;
        :class:`~.errors.EvidenceFileError`: a link, a special file, more than `size`."""
        return gunzip_file(self.root, self.parts(sha256), MAX_BODY if size is None else size)

    def digest(self, sha256: str, size: int | None = None) -> tuple[str, int]:
        """(SHA-256, size) of the bytes kept under `sha256`, hashed as they are
        decompressed (bounded as :meth:`get`), nothing held."""
        return gunzip_digest(self.root, self.parts(sha256), MAX_BODY if size is None else size)

    def scan(self) -> tuple[list[StoredResponse], list[str]]:
        """Every response file, in name order, and one line per entry of the folder that
        the store's layout does not allow (a link, a FIFO, a stray name). A temporary
        file a killed write left (``.<name>.<token>.tmp``) is neither."""
        files: list[StoredResponse] = []
        strays: list[str] = []
        for fan, kind in listing(self.root, (self.folder,)):
            if kind != "folder" or len(fan) != 2 or not is_sha256(fan * 32):
                strays.append(_stray(f"{self.folder}/{shown(fan)}", kind))
                continue
            for name, kind in listing(self.root, (self.folder, fan)):
                sha = name.removesuffix(SUFFIX)
                if name.startswith(".") and name.endswith(".tmp") and kind == "file":
                    continue
                if kind == "file" and name.endswith(SUFFIX) and is_sha256(sha) and sha.startswith(fan):
                    files.append(StoredResponse(sha, self.root / self.folder / fan / name))
                else:
                    strays.append(_stray(f"{self.folder}/{fan}/{shown(name)}", kind))
        return files, strays

    def __iter__(self) -> Iterator[StoredResponse]:
        """Every response file, in name order (see :meth:`scan`)."""
        return iter(self.scan()[0])

    def size(self) -> tuple[int, int]:
        """(files, bytes) of the responses kept."""
        files = sizes = 0
        for stored in self:
            files += 1
            sizes += stored.path.lstat().st_size
        return files, sizes


def _stray(path: str, kind: str) -> str:
    """The line for an entry of the store that its layout does not allow."""
    if kind in ("file", "folder"):
        return f"{path} is a {kind} whose name the evidence store's layout does not allow"
    return f"{path} is {kind}: not read"
