"""`diligence ARGS`, paused at a chosen statement of a namespace's load until the test
says go: the moment to take a server away from under the load.

    python -m tests.lake.pausepoint POINT FOLDER -- sync --warehouse W ...

POINT is ``<n>:<text>``: before the n-th statement of the loads whose SQL contains
`text`, the process writes ``FOLDER/reached`` and waits (60 s at most) for ``FOLDER/go``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

WAIT_SECONDS = 60


def install(point: str, folder: Path) -> None:
    from dlt.destinations.impl.duckdb.sql_client import DuckDbSqlClient

    count, _, text = point.partition(":")
    seen, wanted = 0, int(count)
    execute = DuckDbSqlClient.execute_sql

    def pause_at(self: Any, sql: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal seen
        if text in str(sql).lower():
            seen += 1
            if seen == wanted:
                (folder / "reached").write_text(str(sql)[:200])
                deadline = time.monotonic() + WAIT_SECONDS
                while not (folder / "go").exists() and time.monotonic() < deadline:
                    time.sleep(0.05)
        return execute(self, sql, *args, **kwargs)

    DuckDbSqlClient.execute_sql = pause_at  # type: ignore[method-assign]


def main() -> None:
    point, folder, separator, *args = sys.argv[1:]
    assert separator == "--", "usage: pausepoint POINT FOLDER -- diligence arguments"
    install(point, Path(folder))
    from entry import main as diligence

    sys.argv = ["diligence", *args]
    diligence()


if __name__ == "__main__":
    main()
