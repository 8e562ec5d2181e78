"""Owner-only files for confidential data, whatever the umask.

The warehouse, the analysts' published copy, exports, the HTML report, downloaded
documents and dlt's pipeline folders hold counterparties' confidential answers. They
are created (or, for files written by DuckDB and dlt, set right after each step) with
these modes, never with the umask's::

    setting (config ``[warehouse] file_mode``, env ``DILIGENCE_FILE_MODE``)
    owner   (default)   files 0600   folders 0700
    group               files 0640   folders 0750   (a team's group may read, not write)

Folders are only changed when this code creates them (or they are the project's own,
like ``.dlt-pipelines``): an existing folder the user chose, such as ``--out ~/shared``,
keeps its mode; the files written into it get the setting's. What DuckDB writes while a
step holds the warehouse (its WAL, its spill folder, the analysts' copy being written) is
created under :func:`private_files`, so it is never readable by others, even for a moment.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

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


def make_dirs(folder: Path, *, own: bool = False) -> Path:
    """Create `folder` and its missing parents with the folder mode; return it.

    Only folders created here get the mode, unless `own` says `folder` is the project's
    own (then it is set even if it existed).
    """
    folder = Path(folder)
    mode = modes().folder
    missing = []
    current = folder
    while not current.exists() and current != current.parent:
        missing.append(current)
        current = current.parent
    folder.mkdir(mode=mode, parents=True, exist_ok=True)
    for created in (*missing, *([folder] if own else [])):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(created, mode)
    return folder


def protect(*paths: Path) -> None:
    """Give each existing file the file mode. A folder is left as it is: only
    :func:`make_dirs` sets folders' modes (those it creates, and the project's own)."""
    mode = modes().file
    for path in paths:
        if not Path(path).is_dir():
            with contextlib.suppress(FileNotFoundError):
                os.chmod(path, mode)


def protect_tree(root: Path) -> None:
    """Give `root` and everything under it the modes (files and folders alike)."""
    root = Path(root)
    if not root.exists():
        return
    current = modes()
    for folder, _subfolders, files in os.walk(root):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(folder, current.folder)
        for name in files:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                with contextlib.suppress(FileNotFoundError):
                    os.chmod(path, current.file)


def write_text_atomically(path: Path, text: str) -> Path:
    """Write `text` to `path` with the file mode from its first byte, then move it into
    place in one step: a reader sees the old file or the new one, never half of one."""
    path = Path(path)
    make_dirs(path.parent)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, modes().file)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    return path
