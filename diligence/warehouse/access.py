"""Opening a warehouse file that another process may hold open.

DuckDB locks a database file for the process that opens it to write, and no other
process opens it meanwhile, not even to read. This module opens the file
(:func:`connect_file`), waits for a writer to let go (:func:`wait_until_writable`), and
words the one line a step gets when it cannot (:func:`busy`): a sync of ours, named by
the pid in the writer lock (:mod:`.lock`), or another session, named by the pid in
DuckDB's error.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from ..errors import WarehouseBusyError
from .location import WarehouseLocation
from .lock import being_written, lock_holder
from .migrate import require_readable
from .paths import published_path

__all__ = ["busy", "connect_file", "wait_until_writable"]

_LOCK_HOLDER = re.compile(r"PID (\d+)")


def _is_lock_conflict(exc: BaseException) -> bool:
    return "Could not set lock on file" in str(exc) or "Conflicting lock" in str(exc)


def wait_until_writable(warehouse: Path, *, wait_seconds: float = 0.0) -> None:
    """Return once no other process holds `warehouse` open; raise after `wait_seconds`.

    Raises :class:`WarehouseBusyError` naming the process that holds the file. A file
    that does not exist yet is held by no one (and DuckDB is not even imported).
    """
    if not warehouse.exists():
        return
    # start-up (DuckDB 0.13 s of imports): DuckDB (through lake) loads only when there is a file to open
    import duckdb

    from .lake import connect

    deadline = time.monotonic() + wait_seconds
    while True:
        try:
            connect(WarehouseLocation(path=warehouse)).close()
            return
        except duckdb.Error as exc:
            if not _is_lock_conflict(exc):
                raise
            if time.monotonic() >= deadline:
                raise busy(warehouse, exc, reading=False) from None
            time.sleep(0.5)


def busy(warehouse: Path, exc: BaseException, *, reading: bool) -> WarehouseBusyError:
    """The one line for a step that cannot open `warehouse` because another process holds
    it (DuckDB's lock conflict `exc`): a sync of ours, named with its pid, or a session."""
    writer = lock_holder(warehouse) if reading else None
    if writer is not None:
        return being_written(warehouse, writer)
    holder = _LOCK_HOLDER.search(str(exc))
    who = f"process {holder.group(1)}" if holder else "another process"
    if reading:
        return WarehouseBusyError(
            f"{warehouse} is open in {who}; query the analysts' copy {published_path(warehouse)}, "
            "or try again when it has finished"
        )
    return WarehouseBusyError(
        f"{warehouse} is open in {who}; close that session (analysts can query "
        f"{published_path(warehouse)} instead) or pass --wait SECONDS"
    )


def connect_file(warehouse: Path, *, read_only: bool = False) -> Any:
    """A new DuckDB connection to the warehouse file `warehouse` (the caller closes it).

    A file a newer DuckDB wrote raises ``WarehouseFormatError`` (see :mod:`.migrate`);
    a file another process holds open raises :class:`WarehouseBusyError` (:func:`busy`).
    """
    from .lake import connect  # start-up (DuckDB 0.13 s of imports): lake imports DuckDB

    require_readable(warehouse)
    try:
        return connect(WarehouseLocation(path=warehouse), read_only=read_only)
    except Exception as exc:  # duckdb.Error, not imported at start-up
        if _is_lock_conflict(exc):  # another process holds the file
            raise busy(warehouse, exc, reading=read_only) from None
        raise
