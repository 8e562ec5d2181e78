"""Where an export's files go: a new folder per run, or the one `--out` names, each put
in place whole.

By default every export writes a folder of its own under the reports root (``reports/``,
the flows' ``reports_dir``), and ``latest`` names the newest::

    reports/
      2026-11-28T061500Z-20261128T061455123456Z/    answers.csv, ..., report.html
      2026-11-28T121500Z-20261128T121452004211Z/
      latest -> 2026-11-28T121500Z-20261128T121452004211Z

A run folder's name is ``<date>T<time>Z-<sync id>``: the moment the export started, in
UTC as ``YYYY-MM-DDTHHMMSSZ`` (no colons, so every file system takes it, and the names
sort in time order), then the id of the last successful sync in ``analytics.sync_runs``,
whose data the files hold (``no-sync-id`` when the warehouse names none). A second
export in the same second of the same sync gets ``-2``, ``-3``, ... appended. The files
are written into a hidden folder beside it (``.<name>.partial-<token>``), renamed to its
name once every file is written; only then is ``latest`` moved to it: a relative symbolic
link, replaced in one step (a new link renamed over it), or where links cannot be made,
a text file holding the folder's name. Last, the run folders beyond ``[exports] keep``
(default 30), oldest first, are removed: only real folders (never a link) whose name is
a run folder's exactly, never the one just written; nothing else in the root is touched
but the hidden folders of exports killed before they finished (their process is gone).

``--out DIR`` writes exactly there, with no run folder and no ``latest``. DIR may be new,
empty, or hold an earlier export only (``<report>.csv``, ``<report>.parquet``,
``report.html``); anything else (other files, a warehouse, ``/``, the home folder, the
folder the command runs in) is refused with :class:`~diligence.errors.ExportFolderError`
before anything is written, as is a reports root whose ``latest`` is a real folder. An
earlier export is replaced whole: the files are written into a new folder beside DIR
(``.<DIR>.new-<token>``), the old DIR is renamed away, the new one renamed in, and the old
removed; a reader sees the old export or the new one, never half of one, and an export
that fails leaves the old one as it was (the next export to DIR removes what a killed
one left beside it). An empty DIR (one the user made) keeps its
place and mode: the files are written into a hidden folder inside it, then moved in.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import shutil
import stat
from datetime import datetime, timezone
from pathlib import Path
from types import TracebackType

from pipelines.evidence.confined import SYNC_ID, is_sync_id

from ..errors import ExportFolderError
from ..warehouse.filemodes import make_dirs, modes, write_text_atomically
from ..warehouse.lock import process_alive
from .export import REGISTER_FILE, REPORTS, Format

__all__ = ["LATEST", "NO_SYNC_ID", "RUN_FOLDER", "ExportFolder", "latest_run", "prune_runs", "run_folder_name"]

log = logging.getLogger("diligence.export")

#: The name in the reports root that points to the newest run folder.
LATEST = "latest"
#: A run folder's sync id when the warehouse names no successful sync.
NO_SYNC_ID = "no-sync-id"
#: A run folder's name, exactly: ``<date>T<time>Z-<sync id>[-<n>]``.
RUN_FOLDER = re.compile(
    r"(?P<started>[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{6}Z)"
    rf"-(?P<sync>{SYNC_ID.pattern}|{NO_SYNC_ID})"
    r"(?:-(?P<n>[2-9]|[1-9][0-9]+))?"
)
_STARTED = "%Y-%m-%dT%H%M%SZ"
#: The files an export folder holds: every report in every format, the HTML report the
#: demo and the flows write beside them, a register's manifest (and their hidden
#: temporary names).
_EXPORT_FILES = frozenset({f"{report}.{fmt}" for report in REPORTS for fmt in Format}
                          | {"report.html", REGISTER_FILE})
_EXPORT_TEMPORARY = re.compile(r"\.(?P<name>[a-z_]+\.[a-z]+)\.[0-9a-f]+\.tmp")
#: A hidden folder an export writes or sets aside: ``.<name>.<kind>-<pid>-<8 hex>``.
_HIDDEN = re.compile(r"\.(?P<name>.+)\.(?:partial|new|old)-(?P<pid>[0-9]+)-[0-9a-f]{8}")
#: How many names a second run of the same second and sync tries.
_MAX_SUFFIX = 100


def run_folder_name(started: datetime, sync_id: str | None) -> str:
    """The run folder's name of an export started at `started` (any zone; written in
    UTC) on the data of `sync_id` (:data:`NO_SYNC_ID` when None or not a sync id)."""
    shown = sync_id if is_sync_id(sync_id) else NO_SYNC_ID
    return f"{started.astimezone(timezone.utc).strftime(_STARTED)}-{shown}"


def latest_run(root: Path) -> Path | None:
    """The run folder ``latest`` in `root` names (a link, or a text file where links
    cannot be made), if it is a run folder's name and that folder exists; else None."""
    latest = Path(root) / LATEST
    try:
        if latest.is_symlink():
            name = os.readlink(latest)
        else:
            with open(latest, "rb", opener=_no_follow) as handle:
                name = handle.read(256).decode("utf-8", "replace").strip()
    except OSError:
        return None
    if RUN_FOLDER.fullmatch(name) is None or not _is_real_folder(Path(root) / name):
        return None
    return Path(root) / name


def remove_leftovers(folder: Path, named: re.Pattern[str] | str) -> list[Path]:
    """Remove from `folder` the hidden folders of exports killed before they finished:
    real folders named as an export's hidden folder for a name `named` matches, whose
    process is gone. Returns those removed."""
    removed = []
    for entry in sorted(os.listdir(folder)):
        found = _HIDDEN.fullmatch(entry)
        if found is None or re.fullmatch(named, found["name"]) is None or process_alive(int(found["pid"])) \
                or not _is_real_folder(Path(folder) / entry):
            continue
        shutil.rmtree(Path(folder) / entry, ignore_errors=True)
        removed.append(Path(folder) / entry)
    return removed


def prune_runs(root: Path, keep: int, current: str | None = None) -> list[Path]:
    """Remove the run folders in `root` beyond the newest `keep` (never `current`, the one
    just written); return those removed. Only real folders whose name is a run folder's
    exactly are counted or removed: links, files and other names are never touched. A
    folder that cannot be removed is logged and left."""
    runs = sorted((name for name in os.listdir(root) if _is_run_folder(root, name)), key=_order)
    removed = []
    for name in runs[: max(len(runs) - keep, 0)]:
        if name == current:
            continue
        try:
            shutil.rmtree(Path(root) / name)  # refuses a link; removes links inside, never their targets
        except OSError as exc:
            log.warning("could not remove the old export folder %s: %s", Path(root) / name, exc)
            continue
        removed.append(Path(root) / name)
    return removed


class ExportFolder:
    """One export's folder: entering gives the hidden folder to write into; leaving
    without an error puts it in place (a new run folder under `root`, then ``latest`` and
    pruning to `keep`; or exactly `out`), leaving with one removes it. :attr:`path` is
    where the files are once it is in place."""

    def __init__(self, out: Path | None, *, root: Path, sync_id: str | None, keep: int,
                 started: datetime | None = None) -> None:
        self.out = Path(out) if out is not None else None
        self.root = Path(root)
        self.keep = keep
        self.name = run_folder_name(started or datetime.now(timezone.utc), sync_id)
        self.path = self.out if self.out is not None else self.root / self.name
        self._token = f"{os.getpid()}-{secrets.token_hex(4)}"
        self._building: Path | None = None
        self._target: Path | None = None  # --out, resolved
        self._in_place = False

    def __enter__(self) -> Path:
        if self.out is None:
            self._building = self._start_run()
        else:
            self._building = self._start_out(self.out)
        return self._building

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        assert self._building is not None
        try:
            if kind is None:
                self._finish()
        finally:
            if self._building.exists():  # an error, or the in-place folder emptied
                shutil.rmtree(self._building, ignore_errors=True)

    # -- a run folder under the root ----------------------------------------------------
    def _start_run(self) -> Path:
        root = make_dirs(self.root)
        if _is_real_folder(root / LATEST):
            raise ExportFolderError(f"{root / LATEST} is a folder, not the link to the newest export: "
                                    "move it away (an export never replaces it)")
        return _new_folder(root / f".{self.name}.partial-{self._token}")

    def _finish(self) -> None:
        assert self._building is not None
        if self._target is not None:
            self._put_out(self._target, self._building)
            return
        name = _rename_free(self._building, self.root, self.name)
        self.path = self.root / name
        _point_latest(self.root, name, self._token)
        prune_runs(self.root, self.keep, current=name)
        remove_leftovers(self.root, RUN_FOLDER)

    # -- exactly --out ------------------------------------------------------------------
    def _start_out(self, out: Path) -> Path:
        target = self._target = _checked_out(out)
        if target.parent.is_dir():
            remove_leftovers(target.parent, re.escape(target.name))  # what an export killed beside it left
        if target.is_dir() and not os.listdir(target):  # empty: written inside, moved in at the end
            self._in_place = True
            return _new_folder(target / f".export.partial-{self._token}")
        make_dirs(target.parent)
        return _new_folder(target.with_name(f".{target.name}.new-{self._token}"))

    def _put_out(self, target: Path, building: Path) -> None:
        if self._in_place:
            for name in sorted(os.listdir(building)):
                os.rename(building / name, target / name)
            return
        if not target.is_dir():
            os.rename(building, target)
            return
        earlier = target.with_name(f".{target.name}.old-{self._token}")
        os.rename(target, earlier)
        try:
            os.rename(building, target)
        except BaseException:
            os.rename(earlier, target)  # the old export back in its place
            raise
        shutil.rmtree(earlier, ignore_errors=True)


def _checked_out(out: Path) -> Path:
    """`out` resolved, if an export may be written there: new, empty, or an earlier
    export only (see the module's docstring); else :class:`ExportFolderError`."""
    target = Path(out).expanduser().resolve()
    if target == Path(target.anchor) or target == Path.home().resolve():
        raise ExportFolderError(f"--out {out}: an export is never written into {target}; name a folder for it")
    if target.exists() and not target.is_dir():
        raise ExportFolderError(f"--out {out} is not a folder; name a new folder for the export")
    if not target.is_dir():
        return target
    remove_leftovers(target, "export")  # what an export killed inside it left
    foreign = sorted(name for name in os.listdir(target) if not _is_export_file(target, name))
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise ExportFolderError(f"--out {out} holds more than an earlier export ({shown}): name a new or "
                                "empty folder, or one with an earlier export only (it is replaced whole)")
    if os.listdir(target) and target == Path.cwd().resolve():
        raise ExportFolderError(f"--out {out} is the folder this command runs in; name another folder")
    return target


def _is_export_file(folder: Path, name: str) -> bool:
    """Whether `name` in `folder` is a regular file an export writes (or its temporary)."""
    temporary = _EXPORT_TEMPORARY.fullmatch(name)
    if name not in _EXPORT_FILES and (temporary is None or temporary["name"] not in _EXPORT_FILES):
        return False
    return stat.S_ISREG(os.lstat(folder / name).st_mode)


def _new_folder(path: Path) -> Path:
    """Create the folder `path` (it must not exist) with the folder mode."""
    mode = modes().folder
    os.mkdir(path, mode)
    os.chmod(path, mode)  # whatever the umask
    return path


def _rename_free(building: Path, root: Path, name: str) -> str:
    """Rename `building` to `name` in `root`, or to `name-2`, `name-3`, ... when taken
    (a second export in the same second of the same sync); return the name it got."""
    for n in range(1, _MAX_SUFFIX + 1):
        candidate = name if n == 1 else f"{name}-{n}"
        if os.path.lexists(root / candidate):
            continue
        try:
            os.rename(building, root / candidate)
        except OSError:  # taken meanwhile (a folder with files in it is never replaced)
            continue
        return candidate
    raise ExportFolderError(f"{root} already has {_MAX_SUFFIX} export folders named {name}[-n]")


def _point_latest(root: Path, name: str, token: str) -> None:
    """Make ``latest`` in `root` name the folder `name`: a relative link, replaced in one
    step; where links cannot be made, a text file holding the name."""
    link = root / f".{LATEST}.{token}"
    try:
        os.symlink(name, link)
    except OSError:
        write_text_atomically(root / LATEST, name + "\n")
        return
    try:
        os.replace(link, root / LATEST)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(link)
        raise


def _is_run_folder(root: Path, name: str) -> bool:
    return RUN_FOLDER.fullmatch(name) is not None and _is_real_folder(Path(root) / name)


def _is_real_folder(path: Path) -> bool:
    """A folder itself, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _order(name: str) -> tuple[str, str, int]:
    """A run folder's place in time: started, then sync id, then the same second's `n`."""
    match = RUN_FOLDER.fullmatch(name)
    assert match is not None
    return match["started"], match["sync"], int(match["n"] or 1)


def _no_follow(path: str, flags: int) -> int:
    return os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK)
