"""`diligence ARGS` whose disk fills up at the start of a chosen phase: the filesystem
of FILLER is filled completely (a real full disk: the test mounts a small tmpfs) right
before the phase runs.

    python -m tests.reliability.diskfull PHASE FILLER -- sync --warehouse W ...

PHASE: ``fetch`` (the namespaces' staged rows, the manifest and the responses kept), ``load`` (the first
namespace's commit), ``build`` (the dbt build) or ``publish`` (the analysts' copy); the
last two also in the process the models build in (:data:`SITE`, first on the PYTHONPATH).
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path
from typing import Any


def fill(filler: Path) -> None:
    """Write `filler` until its filesystem has not one byte left."""
    chunk = 1 << 20
    with filler.open("ab", buffering=0) as handle:
        while chunk >= 512:
            try:
                handle.write(b"\0" * chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk //= 2


def install(phase: str, filler: Path) -> None:
    import diligence.analytics
    import diligence.sync
    from diligence.warehouse import Warehouse

    owner, name = {
        "fetch": (diligence.sync, "stream_namespaces"),
        "load": (Warehouse, "load"),
        "build": (diligence.analytics, "build_models"),
        "publish": (diligence.analytics, "publish_analytics"),
    }[phase]
    original = getattr(owner, name)

    def filled_first(*args: Any, **kwargs: Any) -> Any:
        fill(filler)
        return original(*args, **kwargs)

    setattr(owner, name, filled_first)


def main() -> None:
    phase, filler, separator, *args = sys.argv[1:]
    assert separator == "--", "usage: diskfull PHASE FILLER -- diligence arguments"
    install(phase, Path(filler))
    # the process the models build in (diligence.analytics.aside) fills it there too,
    # as it starts (diskfull_site/sitecustomize.py)
    os.environ["DISKFULL_PHASE"], os.environ["DISKFULL_FILLER"] = phase, filler
    from entry import main as diligence

    sys.argv = ["diligence", *args]
    os.environ.setdefault("COLUMNS", "1000")
    diligence()


#: first on the PYTHONPATH of a run: its sitecustomize.py installs the phase's filler in
#: the processes the run starts
SITE = Path(__file__).resolve().parent / "diskfull_site"

if __name__ == "__main__":
    main()
