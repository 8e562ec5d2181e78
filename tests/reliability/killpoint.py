"""`diligence ARGS`, killed with SIGKILL by itself at a chosen point of a namespace's load:
a kill at an exact statement, where a kill from outside would land anywhere.

    python -m tests.reliability.killpoint POINT -- sync --warehouse W ...

POINT is ``<n>:<text>``, the n-th statement of the loads (counted over the process)
whose SQL contains `text` (empty: any statement), killed before it runs; or
``after-commit:<n>``, right after the n-th namespace's load has committed, before
anything else happens (its manifest does not record the commit yet); or ``seal:<step>``,
at a step of sealing the sync's manifest into the evidence chain: ``written`` (the
sealed manifest written to its temporary file, not yet fsynced), ``synced`` (fsynced,
not yet renamed into place), ``renamed`` (in place; CHAIN and HEAD not yet moved),
``head`` (HEAD moved; the records not yet removed).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _sealed_temporary(fd: int) -> bool:
    """Whether `fd` is the temporary file a sealed manifest is written to."""
    try:
        name = os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[-1]
    except OSError:
        return False
    return name.startswith(".") and ".manifest.gz." in name and name.endswith(".tmp")


def _install_seal(step: str) -> None:
    fsync, replace = os.fsync, os.replace

    def fsync_then_maybe_kill(fd: int) -> None:
        sealing = _sealed_temporary(fd)
        if sealing and step == "written":
            _kill()
        fsync(fd)
        if sealing and step == "synced":
            _kill()

    def replace_then_maybe_kill(source: Any, target: Any, **kwargs: Any) -> None:
        replace(source, target, **kwargs)
        name = str(target).rsplit("/", 1)[-1]
        if (step == "renamed" and name.endswith(".manifest.gz")) or (step == "head" and name == "HEAD"):
            _kill()

    os.fsync = fsync_then_maybe_kill
    os.replace = replace_then_maybe_kill  # type: ignore[assignment]


def install(point: str) -> None:
    from dlt.destinations.impl.duckdb.sql_client import DuckDbSqlClient

    from diligence.warehouse import Warehouse

    kind, _, rest = point.partition(":")
    if kind == "seal":
        _install_seal(rest)
        return
    if kind == "after-commit":
        committed, wanted = 0, int(rest)
        load = Warehouse.load

        def load_then_kill(self: Warehouse, *args: Any, **kwargs: Any) -> Any:
            nonlocal committed
            info = load(self, *args, **kwargs)
            committed += 1
            if committed == wanted:
                _kill()
            return info

        Warehouse.load = load_then_kill  # type: ignore[method-assign]
        return
    seen, wanted, text = 0, int(kind), rest
    execute = DuckDbSqlClient.execute_sql  # every statement of a load, whatever the client

    def kill_at(self: Any, sql: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal seen
        if text in str(sql):
            seen += 1
            if seen == wanted:
                _kill()
        return execute(self, sql, *args, **kwargs)

    DuckDbSqlClient.execute_sql = kill_at  # type: ignore[method-assign]


def main() -> None:
    point, separator, *args = sys.argv[1:]
    assert separator == "--", "usage: killpoint POINT -- diligence arguments"
    install(point)
    from entry import main as diligence

    sys.argv = ["diligence", *args]
    diligence()


if __name__ == "__main__":
    main()
