"""The errors of the product: one root, and whether another attempt may succeed.

Every error the product raises on purpose is defined here, in one tree (``transient``:
may the same step succeed if retried?); the module in brackets raises it::

    DiligenceError                  base of everything diligence/ and flows/ raise on
    │                               purpose; not transient unless a subclass says so
    ├── SettingsError               a setting or option is missing or invalid
    │   ├── SelectError             a --select value names no resource (diligence.cli.select)
    │   ├── ScheduleError           a schedule's cron or time zone (diligence.cli.schedule_check)
    │   └── KindError               a change kind that does not exist (diligence.analytics.digest)
    ├── SyncError                   a sync could not run at all (credentials, service,
    │                               configuration, a failed load); transient unless its
    │                               cause is permanent (see flows.retry.is_transient)
    ├── NamespaceSyncError          a namespace could not be read completely (its previous
    │                               data is kept); carries its `NamespaceOutcome`; transient
    ├── NamespacesNotLoadedError    namespaces of a flow's sync that another attempt may load:
    │                               Prefect retries the task, which reads only those
    │                               (flows.company_connections_sync); carries their
    │                               outcomes; transient
    ├── WarehouseBusyError          another writer holds the warehouse (the writer lock or
    │                               an open DuckDB session); transient
    ├── WarehouseNotReadyError      no warehouse yet, or no models yet: the message names the
    │                               command to run first (exit code 2)
    ├── EvidenceError               the evidence cannot serve the command as given (exit code 2)
    ├── WarehouseLocationError      a warehouse location (DuckDB file or DuckLake URI) or
    │                               its data path cannot be used (diligence.warehouse.location)
    ├── WarehouseFormatError        a warehouse file this DuckDB cannot read, or a failed
    │                               migration (diligence.warehouse.migrate)
    ├── ModelError                  a model failed to build (diligence.analytics.models)
    ├── ModelProcessError           the process building the models ended before it
    │                               answered (diligence.analytics.aside)
    ├── RemoteTraceback             the traceback of an error that process raised: its cause
    ├── DbtError                    dbt could not run, or a model or test failed (diligence.analytics.dbt)
    ├── CheckError                  `diligence check` found a problem (diligence.cli.check)
    ├── ExportError                 the reports could not be exported (diligence.report.export)
    │   └── ExportFolderError       a folder an export may not replace or write into: --out,
    │                               the reports root's `latest` (diligence.report.folders;
    │                               exit code 2)
    ├── ReportError                 the warehouse cannot be reported on (diligence.report.data)
    ├── CommandError                a command line that cannot work, with its exit code
    │                               (diligence.cli)
    └── FlowError                   the Prefect flow's own errors (flows.errors)
        └── RunFailedError          a namespace was not loaded or a check failed: what the
                                    result of a Failed flow run raises

The service client has a root of its own, because ``pipelines/`` imports nothing of
ours: ``SourceError`` (``pipelines.company_connections.errors``: ``ConfigurationError``,
and ``ServiceError`` for requests that failed). The two roots meet here:
:func:`raised_on_purpose` knows both (the CLI maps them to exit codes with it). Both
roots carry ``transient``; the flow's retry policy (:mod:`flows.retry`) reads it, and
classes the library errors that have none. Nothing here imports dlt, DuckDB or Prefect
at import time (the client's errors are imported when first needed, since importing
``pipelines.company_connections`` imports dlt).
"""

from __future__ import annotations

import errno
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pipelines.secrets import SECRET_KEYS, redact

from .words import counted

__all__ = [
    "SECRET_KEYS",
    "CheckError",
    "CommandError",
    "DbtError",
    "DiligenceError",
    "ExportError",
    "ExportFolderError",
    "FlowError",
    "KindError",
    "ModelError",
    "ModelProcessError",
    "RemoteTraceback",
    "NamespacesNotLoadedError",
    "ReportError",
    "RunFailedError",
    "ScheduleError",
    "SelectError",
    "WarehouseFormatError",
    "WarehouseLocationError",
    "SyncError",
    "SettingsError",
    "WarehouseBusyError",
    "WarehouseNotReadyError",
    "EvidenceError",
    "RegisterError",
    "NamespaceSyncError",
    "disk_full_line",
    "redact",
    "error_chain",
    "raised_on_purpose",
]


class DiligenceError(Exception):
    """Base of every error diligence/ raises on purpose.

    `transient` says whether another attempt of the same step may succeed; subclasses
    set a default, and an instance may override it. `exit_code` is the CLI's exit code
    for it, the same on every command: 1 (the work failed), 2 (the command cannot run as
    given: a usage error, or a warehouse not ready for it yet).
    """

    transient: bool = False
    exit_code: int = 1

    def __init__(self, message: str = "", *, transient: bool | None = None,
                 path: Path | None = None) -> None:
        super().__init__(message)
        if transient is not None:
            self.transient = transient
        #: where the failed step was writing, when the error's cause does not say (e.g.
        #: dlt's folder of a load): named by :func:`disk_full_line`
        self.path = path


class SyncError(DiligenceError):
    """A sync that could not run at all (credentials, service, configuration, load)."""

    transient = True


class SettingsError(DiligenceError):
    """A setting or an option is missing or invalid: the command cannot run as given
    (exit code 2); nothing was created."""

    transient = False
    exit_code = 2


class SelectError(SettingsError):
    """A --select value names no resource; the message lists the valid ones."""


class ScheduleError(SettingsError):
    """The cron or the time zone of a schedule is not valid; the message says which."""


class KindError(SettingsError):
    """A change kind that does not exist; the message lists the valid ones."""


class WarehouseNotReadyError(DiligenceError):
    """The warehouse is not ready for the command yet: it does not exist (run
    ``diligence sync``) or has no models (run ``diligence models``). The message names
    the command to run first."""

    transient = False
    exit_code = 2


class EvidenceError(DiligenceError):
    """The evidence cannot serve the command as given: no store, an ``--as-of`` before
    the first sync, a company the warehouse does not know, a replay into a warehouse
    that has data. The message says which."""

    transient = False
    exit_code = 2


class RegisterError(DiligenceError):
    """The register as of a date cannot be made as asked: a date before the warehouse's
    first sync, an ``--out`` that is the warehouse or its analysts' copy, a lake. The
    message says which; nothing is written."""

    transient = False
    exit_code = 2


class WarehouseBusyError(DiligenceError):
    """Another writer holds the warehouse; it is free again once that writer is done."""

    transient = True


class WarehouseLocationError(DiligenceError):
    """The warehouse location or its data path cannot be used; the message is one line
    and never shows a password. Not transient: retrying the same settings fails the same."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(redact(message).split()), transient=False)


class WarehouseFormatError(DiligenceError):
    """The warehouse file was written by a DuckDB this release cannot read, or its
    migration failed; the message is one line and names what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message, transient=False)


class ModelError(DiligenceError):
    """A model failed to build; `analytics` stays as the previous build left it. The
    message's first line names the model, the database's error and the SQL file that
    ran; the database's ``LINE n:`` and its caret follow when it gave them."""

    def __init__(self, model_name: str, duckdb_message: str, sql_path: Path | None = None,
                 caret: str | None = None) -> None:
        message = f"model {model_name} failed: {duckdb_message}"
        if sql_path is not None:
            message += f" (SQL: {sql_path})"
        if caret is not None:
            message += "\n" + caret
        super().__init__(message)
        self.model_name = model_name
        self.duckdb_message = duckdb_message
        self.sql_path = sql_path
        self.caret = caret

    def __reduce__(self) -> tuple[object, ...]:
        # its own arguments, then what was set on it since (`path`, `transient`)
        return (type(self), (self.model_name, self.duckdb_message, self.sql_path, self.caret), self.__dict__)

    @property
    def out_of_memory(self) -> bool:
        return "Out of Memory" in self.duckdb_message


class ModelProcessError(DiligenceError):
    """The process building the models ended before it answered (killed, or out of
    memory); `analytics` and the analysts' copy stay as the previous build left them."""


class RemoteTraceback(DiligenceError):
    """The traceback of an error raised in the process the models built in: the cause
    of that error, raised again here (``--debug`` shows it)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class DbtError(DiligenceError):
    """dbt could not run, or a model or test failed. The message is one line naming the
    failed node (``model answers``, ``test answers__unique_key``), passwords redacted."""

    transient = False

    def __init__(self, message: str, *, node: str | None = None) -> None:
        super().__init__(" ".join(redact(message).split()))
        self.node = node


class CheckError(DiligenceError):
    """A check that failed: settings, credentials, service or a namespace."""

    transient = False


class ExportError(DiligenceError):
    """The reports could not be exported (e.g. the models were never built)."""


class ExportFolderError(ExportError):
    """The export's folder cannot be used as given (``--out`` holds other files, or the
    reports root's ``latest`` is a folder of someone else's): exit code 2, nothing written."""

    exit_code = 2


class ReportError(DiligenceError):
    """The warehouse cannot be reported on (missing, or not modelled yet)."""


class CommandError(DiligenceError):
    """An error to print as one line, with its exit code (even with --debug)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = code


class FlowError(DiligenceError):
    """Base class of the flow's own exceptions."""

    transient = False


class RunFailedError(FlowError):
    """The run finished its steps, but a namespace was not loaded or a check failed."""


class NamespaceSyncError(DiligenceError):
    """A namespace could not be read completely; nothing of it was loaded."""

    transient = True

    def __init__(self, outcome: Any) -> None:
        super().__init__(
            f"namespace {outcome.namespace_company_id} not loaded, previous data kept: "
            f"{outcome.error}"
        )
        self.outcome = outcome

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.outcome,))


class NamespacesNotLoadedError(DiligenceError):
    """Namespaces a sync did not load, for a reason another attempt may fix (their previous
    data is kept); `outcomes` are their `NamespaceOutcome`s."""

    transient = True

    def __init__(self, outcomes: list[Any]) -> None:
        super().__init__(
            f"{counted(len(outcomes), 'namespace')} not loaded, to be read again (previous data kept): "
            + ", ".join(f"{o.namespace_company_id} ({o.error})" for o in outcomes)
        )
        self.outcomes = outcomes

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.outcomes,))


def raised_on_purpose(exc: BaseException) -> bool:
    """True for an error of either root: ours (`DiligenceError`) or the client's
    (`SourceError`). Its message is the one line to show; anything else is a bug."""
    if isinstance(exc, DiligenceError):
        return True
    from pipelines.company_connections.errors import (
        SourceError,  # start-up (dlt 0.9 s of imports): loads dlt
    )

    return isinstance(exc, SourceError)


def error_chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then its causes and contexts and the members of exception groups."""
    seen: set[int] = set()
    pending = [exc]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        for linked in (current.__cause__, current.__context__):
            if linked is not None:
                pending.append(linked)


_NO_SPACE = "No space left on device"
_QUOTED_PATH = re.compile(r"""["'](/[^"']+)["']""")


def disk_full_line(exc: BaseException) -> str | None:
    """The one line for a step that failed because a disk filled up (anywhere in `exc`'s
    chain: an ``ENOSPC`` OSError, or DuckDB's or dlt's text of one), naming the path, the
    space free on its device and about how much the step needs; None for anything else.

    Every step that writes commits whole or not at all, so the previous warehouse and the
    analysts' copy are as they were: the line says so."""
    chain = list(error_chain(exc))
    for error in chain:
        if isinstance(error, OSError) and error.errno == errno.ENOSPC:
            path = str(error.filename) if error.filename else None
        elif _NO_SPACE in str(error):
            match = _QUOTED_PATH.search(str(error))
            path = match.group(1) if match else None
        else:
            continue
        if path is None:  # the step's own record of where it wrote
            path = next((str(e.path) for e in chain if getattr(e, "path", None)), None)
        return _disk_full(Path(path) if path else None)
    return None


def _disk_full(path: Path | None) -> str:
    folder = path.parent if path is not None else Path.cwd()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    free = shutil.disk_usage(folder).free
    database = _database_of(path) if path is not None else None
    needed = ""
    if database is not None and database.is_file() and database.suffix == ".duckdb":
        needed = f"; free at least {_size(database.stat().st_size)} (the size of {database.name})"
    where = f"for {path}" if path is not None else f"in {folder}"
    return (f"disk full: no space left {where} ({_size(free)} free on its device){needed}, then "
            "run it again; nothing of this step was committed: the warehouse and the analysts' "
            "copy are as they were")


def _database_of(path: Path) -> Path | None:
    """The warehouse file a written path belongs to: a DuckDB file itself, its WAL, its
    spill folder or a copy being written beside it (``x.duckdb.wal``, ``.x.duckdb.<id>.tmp``),
    or a file of its dlt folder (``<dir>/.dlt-pipelines/<stem>/...``: staged rows)."""
    parts = path.parts
    if ".dlt-pipelines" in parts:
        at = parts.index(".dlt-pipelines")
        if at + 1 < len(parts):
            return Path(*parts[:at]) / f"{parts[at + 1]}.duckdb"
    for candidate in (path, *path.parents):  # a file in DuckDB's spill folder: its folder
        name = candidate.name.lstrip(".")
        if ".duckdb" in name:
            return candidate.with_name(name[:name.index(".duckdb") + len(".duckdb")])
    return None


def _size(count: int) -> str:
    return f"{count / 2**20:,.1f} MB" if count >= 2**20 else f"{count / 2**10:,.0f} KB"
