"""`diligence ARGS`, killed with SIGKILL by itself at a chosen point of a namespace's load:
a kill at an exact statement, where a kill from outside would land anywhere.

    python -m tests.reliability.killpoint POINT -- sync --warehouse W ...

POINT is ``<n>:<text>``, the n-th statement of the loads (counted over the process)
whose SQL contains `text` (empty: any statement), killed before it runs; or
``after-commit:<n>``, right after the n-th namespace's load has committed, before
anything else happens (its manifest does not record the commit yet).
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any


def _kill() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def install(point: str) -> None:
    from dlt.destinations.impl.duckdb.sql_client import DuckDbSqlClient

    from diligence.warehouse import Warehouse

    kind, _, rest = point.partition(":")
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
