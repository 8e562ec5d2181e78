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
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FileModes", "ResponseStore", "StoredResponse", "body_sha256", "make_folder", "new_file"]

RESPONSES = "responses"
SYNCS = "syncs"
ENTRIES = "entries"
SUFFIX = ".gz"
#: gzip's level: JSON compresses to about a fifth at level 6, a level that costs a small
#: share of a request's time on the fetch thread
LEVEL = 6


@dataclass(frozen=True)
class FileModes:
    """The modes of the files and folders of an evidence store (default: owner-only)."""

    file: int = 0o600
    folder: int = 0o700


def make_folder(folder: Path, modes: FileModes) -> Path:
    """Create `folder` and its missing parents with the folder mode, whatever the umask."""
    missing = []
    current = folder
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    folder.mkdir(mode=modes.folder, parents=True, exist_ok=True)
    for created in missing:
        with contextlib.suppress(FileNotFoundError):
            created.chmod(modes.folder)
    return folder


def new_file(path: Path, modes: FileModes, *, append: bool = False) -> int:
    """Open `path` for writing with the file mode from its first byte (a new file, never
    through a symlink; `append`: an existing one is appended to)."""
    flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | (os.O_APPEND if append else os.O_EXCL)
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

    @property
    def responses(self) -> Path:
        return self.root / self.folder

    @property
    def syncs(self) -> Path:
        return self.root / SYNCS

    def path(self, sha256: str) -> Path:
        return self.responses / sha256[:2] / f"{sha256}{SUFFIX}"

    def put(self, body: bytes) -> str:
        """Keep `body` (once: a body already kept is not written again); its sha256."""
        sha = body_sha256(body)
        path = self.path(sha)
        if not path.exists():
            make_folder(path.parent, self.modes)
            temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
            fd = new_file(temporary, self.modes)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(gzip.compress(body, compresslevel=LEVEL, mtime=0))
                os.replace(temporary, path)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    temporary.unlink()
                raise
        return sha

    def has(self, sha256: str) -> bool:
        return self.path(sha256).is_file()

    def get(self, sha256: str) -> bytes:
        """The bytes kept under `sha256` (FileNotFoundError: not kept)."""
        return gzip.decompress(self.path(sha256).read_bytes())

    def __iter__(self) -> Iterator[StoredResponse]:
        """Every response file, in name order."""
        if not self.responses.is_dir():
            return
        for folder in sorted(self.responses.iterdir()):
            for path in sorted(folder.glob(f"*{SUFFIX}")):
                yield StoredResponse(path.name.removesuffix(SUFFIX), path)

    def size(self) -> tuple[int, int]:
        """(files, bytes) of the responses kept."""
        files = sizes = 0
        for stored in self:
            files += 1
            sizes += stored.path.stat().st_size
        return files, sizes
