"""Owner-only files for confidential data, whatever the umask.

The warehouse, the analysts' published copy, exports, the HTML report, downloaded
documents and dlt's pipeline folders hold counterparties' confidential answers. They
are created (or, for files written by DuckDB and dlt, set right after each step) with
these modes, never with the umask's::

    setting (config ``[warehouse] file_mode``, env ``DILIGENCE_FILE_MODE``)
    owner   (default)   files 0600   folders 0700
    group               files 0640   folders 0750   (a team's group may read, not write)

A folder's mode is set only when this code creates it: an existing folder, such as
``--out ~/shared`` or a sticky ``/tmp``, keeps its mode (the files written into it get
the setting's), and nothing is changed through a symbolic link. What DuckDB writes while a
step holds the warehouse (its WAL, its spill folder, the analysts' copy being written) is
created under :func:`private_files`, so it is never readable by others, even for a moment.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pipelines.evidence.confined import make_folders

from ..config import file_mode

__all__ = ["Modes", "modes", "make_dirs", "private_files", "protect", "protect_tree", "write_text_atomically"]


@dataclass(frozen=True)
class Modes:
    """Permission bits for the files and the folders of confidential data."""

    file: int
    folder: int


_MODES = {"owner": Modes(0o600, 0o700), "group": Modes(0o640, 0o750)}


def modes(setting: str | None = None) -> Modes:
    """The modes of `setting` (``owner`` or ``group``), default the configured one."""
    return _MODES[file_mode(setting)]


@contextlib.contextmanager
def private_files() -> Iterator[None]:
    """While the block runs, every file and folder this process creates gets at most the
    configured modes from its first byte, whatever the umask: DuckDB's WAL, its spill
    folder (``<warehouse>.tmp/``) and the temporary copies it writes are made by DuckDB,
    which takes its modes from the umask. The process's umask is made at least as strict
    as the setting's (``owner``: 077, ``group``: 027), then restored."""
    strict = 0o777 & ~modes().folder
    previous = os.umask(strict)
    os.umask(previous | strict)
    try:
        yield
    finally:
        os.umask(previous)


def make_dirs(folder: Path) -> Path:
    """Create `folder` and its missing parents, each with the folder mode; return it.
    A folder that exists keeps its mode."""
    return make_folders(Path(folder), modes().folder)


def _chmod_file(name: str | Path, mode: int, folder: int | None = None) -> None:
    """Give the regular file `name` (in the open `folder`, if given) `mode`; a link, a
    folder or a special file is left as it is."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder)
    except OSError:  # gone, a link, or not ours to open
        return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.fchmod(fd, mode)
    finally:
        os.close(fd)


def protect(*paths: Path) -> None:
    """Give each existing regular file the file mode (never through a link). A folder
    is left as it is: only :func:`make_dirs` sets folders' modes, those it creates."""
    mode = modes().file
    for path in paths:
        _chmod_file(path, mode)


def protect_tree(root: Path) -> None:
    """Give everything under `root` (a folder the project made for itself: dlt's working
    folder, a build's artifacts) the modes, `root` included; no link is followed, so
    nothing outside `root` changes."""
    current = modes()
    with contextlib.suppress(FileNotFoundError):
        for _path, _subfolders, files, folder in os.fwalk(root, follow_symlinks=False):
            os.fchmod(folder, current.folder)
            for name in files:
                _chmod_file(name, current.file, folder)


def write_text_atomically(path: Path, text: str) -> Path:
    """Write `text` to `path` with the file mode from its first byte, then move it into
    place in one step: a reader sees the old file or the new one, never half of one."""
    path = Path(path)
    make_dirs(path.parent)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)  # left by a killed process of the same pid; never written through
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, modes().file)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    return path
