"""What the hostile-store tests share: a store to tamper with, a command run as a process
whose peak memory and time are measured, and a look at everything outside the target.

An attacker here can write the evidence store (or its bucket, or a pack, or the lock),
never our code. Each case ends with its one named line, a non-zero exit, nothing written
outside its target, a peak RSS under :data:`MAX_RSS_MB` and no hang (under
:data:`MAX_SECONDS`)."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import duckdb
import orjson

from tests.cli.helpers import DILIGENCE

MAX_RSS_MB = 1024
MAX_SECONDS = 60

#: what the command must not inherit from the test's environment
_NOT_PASSED_ON = ("SOURCES__", "COLUMNS", "DILIGENCE_")


@dataclass(frozen=True)
class Ran:
    """A finished `diligence` process: exit code, output, peak RSS and wall time."""

    code: int
    out: str
    err: str
    peak_mb: float
    seconds: float

    @property
    def lines(self) -> list[str]:
        return self.err.splitlines()

    def bounded(self) -> Ran:
        """Itself, once its memory and time were within the bounds."""
        assert self.peak_mb < MAX_RSS_MB, f"peak RSS {self.peak_mb:.0f} MB"
        assert self.seconds < MAX_SECONDS, f"{self.seconds:.0f} s"
        return self


def run_bounded(args: list[str], cwd: Path, env: dict[str, str] | None = None,
                timeout: float = MAX_SECONDS) -> Ran:
    """`diligence ARGS` as a process in `cwd`; its peak RSS from ``wait4``. A process
    still running after `timeout` is killed and the test fails (a hang)."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(_NOT_PASSED_ON)}
    full_env.update(env or {})
    began = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        process = subprocess.Popen([DILIGENCE, *args], cwd=cwd, env=full_env, stdin=subprocess.DEVNULL,
                                   stdout=out, stderr=err, start_new_session=True)
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - began > timeout:
                os.killpg(process.pid, signal.SIGKILL)
                os.wait4(process.pid, 0)
                process.returncode = -9
                raise AssertionError(f"diligence {' '.join(args)} hung: killed after {timeout:.0f} s")
            time.sleep(0.05)
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Ran(process.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                   usage.ru_maxrss / 1024, time.monotonic() - began)


def snapshot(root: Path, *, besides: tuple[Path, ...] = ()) -> dict[str, tuple[int, int, int]]:
    """(mode, size, mtime) of everything under `root` but `besides` (the targets a
    command may write): compared before and after, it shows a write anywhere else."""
    found: dict[str, tuple[int, int, int]] = {}
    skipped = {p.resolve() for p in besides}
    for folder, subfolders, files in os.walk(root):
        here = Path(folder)
        subfolders[:] = [s for s in subfolders if (here / s).resolve() not in skipped]
        for name in [*files, *subfolders]:
            path = here / name
            if path.resolve() in skipped:
                continue
            info = path.lstat()
            found[str(path.relative_to(root))] = (info.st_mode, info.st_size, info.st_mtime_ns)
    return found


def gzip_bomb(path: Path, gibibytes: int = 3) -> None:
    """A gzip file of `gibibytes` GiB of zeros (one small member, repeated: a few MB)."""
    member = gzip.compress(bytes(1 << 20), compresslevel=9, mtime=0)
    with path.open("wb") as file:
        for _ in range(gibibytes * 1024):
            file.write(member)
    assert zlib.decompressobj(wbits=31).decompress(member)[:1] == b"\0"


def store_of(warehouse: Path) -> Path:
    return warehouse.with_name(warehouse.name.removesuffix(".duckdb") + ".evidence")


def sealed(warehouse: Path) -> list[Path]:
    """The sealed manifests of `warehouse`'s store, in sync id order."""
    return sorted((store_of(warehouse) / "syncs").glob("*.manifest.gz"))


def a_response(warehouse: Path) -> Path:
    return sorted((store_of(warehouse) / "responses").rglob("*.gz"))[0]


def an_entries_table(warehouse: Path) -> Path:
    return sorted((store_of(warehouse) / "entries").rglob("*.gz"))[0]


def sql(warehouse: Path, statement: str) -> list[tuple]:
    with duckdb.connect(str(warehouse)) as con:
        return con.execute(statement).fetchall()


def read_sealed(path: Path) -> dict:
    return orjson.loads(gzip.decompress(path.read_bytes()))


def write_sealed(path: Path, document: dict) -> None:
    path.write_bytes(gzip.compress(orjson.dumps(document), mtime=0))
