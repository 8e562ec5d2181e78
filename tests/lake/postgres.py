"""A throwaway PostgreSQL cluster for the lake tests: initdb in a temp dir, a free port on
127.0.0.1, stopped by PID.

PostgreSQL refuses to run as root, so when the tests run as root (CI containers) the
cluster runs as the `postgres` user, which then owns the temp dir. The server binaries
come from `PG_BIN` if set, else Debian's `/usr/lib/postgresql/<version>/bin`, else the
`bindir` of `pg_config` on PATH.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.processes import free_port

START_TIMEOUT_SECONDS = 60
STOP_TIMEOUT_SECONDS = 30


class PostgresUnavailable(RuntimeError):
    """The PostgreSQL server binaries are missing or the cluster did not start."""


@dataclass
class PostgresCluster:
    bindir: Path
    root: Path  # temp dir holding data/, the socket and the log
    port: int
    user: str  # OS user the server runs as
    pid: int | None = None

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_path(self) -> Path:
        return self.root / "server.log"

    def conninfo(self, dbname: str) -> str:
        return f"dbname={dbname} host=127.0.0.1 port={self.port} user=postgres"

    def start(self) -> None:
        self._run(
            [str(self.bindir / "initdb"), "-D", str(self.data_dir), "-A", "trust",
             "-U", "postgres", "-E", "UTF8", "--no-sync"],
            timeout=START_TIMEOUT_SECONDS,
        )
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(
            [str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "-o", options,
             "-l", str(self.log_path), "-w", "-t", str(START_TIMEOUT_SECONDS), "start"],
            timeout=START_TIMEOUT_SECONDS + 10,
        )
        self.pid = int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])

    def create_database(self, dbname: str) -> str:
        self._run(
            [str(self.bindir / "createdb"), "-h", "127.0.0.1", "-p", str(self.port),
             "-U", "postgres", dbname],
            timeout=30,
        )
        return self.conninfo(dbname)

    def stop(self) -> None:
        """Fast shutdown by PID (SIGINT), then SIGKILL if it outlives the timeout."""
        if self.pid is None:
            return
        pid, self.pid = self.pid, None
        try:
            os.kill(pid, signal.SIGINT)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if not _alive(pid):
                return
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)

    def _run(self, argv: list[str], *, timeout: float) -> None:
        kwargs: dict = {}
        if os.geteuid() == 0:
            kwargs["user"] = self.user
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, cwd=self.root, **kwargs
        )
        if result.returncode != 0:
            log = self.log_path.read_text() if self.log_path.exists() else ""
            raise PostgresUnavailable(
                f"{Path(argv[0]).name} failed ({result.returncode}): "
                f"{result.stderr.strip() or result.stdout.strip()} {log[-2000:]}"
            )


def find_bindir() -> Path:
    candidates: list[str] = []
    if os.environ.get("PG_BIN"):
        candidates.append(os.environ["PG_BIN"])
    candidates.extend(sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True))
    pg_config = shutil.which("pg_config")
    if pg_config:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10)
        candidates.append(out.stdout.strip())
    for candidate in candidates:
        if candidate and all((Path(candidate) / b).is_file() for b in ("initdb", "pg_ctl")):
            return Path(candidate)
    raise PostgresUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl) not found: install Debian's "
        "postgresql-15 package (apt-get install postgresql-15) or set PG_BIN to their bindir"
    )



def new_cluster() -> PostgresCluster:
    """A cluster (not started) in a new temp dir that the server's OS user owns."""
    bindir = find_bindir()
    root = Path(tempfile.mkdtemp(prefix="diligence-pg-", dir="/tmp"))
    user = pwd.getpwuid(os.geteuid()).pw_name
    if os.geteuid() == 0:
        user = "postgres"
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            raise PostgresUnavailable(
                "tests run as root but there is no `postgres` user to run the server as"
            ) from None
        os.chown(root, entry.pw_uid, entry.pw_gid)
    return PostgresCluster(bindir=bindir, root=root, port=free_port(), user=user)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie child counts as gone; the postmaster is not our child (pg_ctl forked it)
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False
