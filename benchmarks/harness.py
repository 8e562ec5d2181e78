"""Plumbing of the benchmark: the sandbox process, child jobs, medians, the machine.

* :func:`sandbox` runs ``python -m sandbox --port 0`` in its own process,
  waits (bounded) for its ready line, and terminates it on exit.
* :func:`run_child` runs one job of :mod:`benchmarks.worker` in a child process,
  bounded in time, and reads the child's peak RSS from ``os.wait4``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import re
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
EMAIL = "analyst@example.com"
PASSWORD = "sandbox-password"
_READY = re.compile(r"Sandbox ready at (http://\S+)")


class BenchError(RuntimeError):
    """A benchmark step that could not run (sandbox did not start, child failed)."""


WORK_DIR = ROOT / "benchmarks" / ".work"


def child_env() -> dict[str, str]:
    """Environment of every child: quiet dlt, no telemetry, unbuffered output, and a
    bytecode cache.

    This machine sets ``PYTHONDONTWRITEBYTECODE=1`` and the venv holds no ``.pyc``,
    so every process would compile dlt, pyarrow... from source on each import
    (3-4 s, and again inside timed phases where dlt imports lazily). A normal
    install caches bytecode; the children do too, under ``benchmarks/.work/pycache``
    (nothing is written into the venv), after a warm-up run.
    """
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update({
        "PYTHONPYCACHEPREFIX": str(WORK_DIR / "pycache"),
        "PYTHONUNBUFFERED": "1",
        "RUNTIME__DLTHUB_TELEMETRY": "false",
        "RUNTIME__LOG_LEVEL": "WARNING",
    })
    return env


@dataclass
class Sandbox:
    """A running sandbox process."""

    base_url: str
    pid: int
    scale: str

    def _get(self, path: str) -> Any:
        with httpx.Client(base_url=self.base_url, timeout=120) as client:
            response = client.get(path)
            response.raise_for_status()
            return response.json()

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        with httpx.Client(base_url=self.base_url, timeout=60) as client:
            response = client.post(path, json=body)
            response.raise_for_status()
            return response.json()

    def truth(self) -> dict[str, Any]:
        """The ground truth (``GET /_sandbox/truth``)."""
        return self._get("/_sandbox/truth")

    def stats(self) -> dict[str, Any]:
        """Request counters (``GET /_sandbox/stats``)."""
        return self._get("/_sandbox/stats")

    def reset_stats(self) -> None:
        """Zero the request counters."""
        self._post("/_sandbox/stats/reset", {})

    def set_faults(self, **faults: Any) -> None:
        """Change fault switches while serving."""
        self._post("/_sandbox/faults", faults)

    def cpu_seconds(self) -> float | None:
        """User + system CPU seconds of the sandbox process so far (Linux)."""
        try:
            with open(f"/proc/{self.pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return None


@contextlib.contextmanager
def sandbox(scale: str, *, latency_ms: float = 0, rate_limit: float = 0,
            extra: Sequence[str] = (), start_timeout: float = 120.0,
            log_dir: Path | None = None) -> Iterator[Sandbox]:
    """Run the sandbox in its own process on 127.0.0.1 (a free port); stop it on exit."""
    cmd = [sys.executable, "-m", "sandbox", "--host", "127.0.0.1", "--port", "0",
           "--scale", scale]
    if latency_ms:
        cmd += ["--latency-ms", str(latency_ms)]
    if rate_limit:
        cmd += ["--rate-limit", str(rate_limit)]
    cmd += list(extra)
    if log_dir:
        log_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / f"sandbox-{scale}.log", "ab") if log_dir else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=log, env=child_env())
    try:
        assert proc.stdout is not None
        line = _read_line(proc, start_timeout)
        match = _READY.search(line)
        if match is None:
            raise BenchError(f"sandbox did not start ({' '.join(cmd[2:])}): {line!r}")
        yield Sandbox(match.group(1), proc.pid, scale)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        if log is not subprocess.DEVNULL:
            log.close()


def _read_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while b"\n" not in buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or proc.poll() is not None:
                break
            if selector.select(min(remaining, 0.5)):
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                buffer += chunk
    return buffer.decode(errors="replace").strip()


@dataclass
class ChildResult:
    """What one child job returned, with its wall time and peak RSS."""

    result: dict[str, Any]
    peak_rss_mb: float
    wall_seconds: float
    cpu_seconds: float = float("nan")  # user + system of the whole child, imports included
    log: str = ""


def run_child(job: dict[str, Any], *, timeout: float, log_dir: Path,
              profile_to: Path | None = None) -> ChildResult:
    """Run `job` with ``python -m benchmarks.worker`` in a child process.

    The child writes its result as JSON to a file; its peak RSS (``ru_maxrss``) comes
    from ``os.wait4``. With `profile_to`, the job runs under pyinstrument and its session
    is saved there (``.pyisession``, see :mod:`benchmarks.profiling`); the figures of a
    profiled run are not used as measurements.
    Raises :class:`BenchError` when the child fails or exceeds `timeout` seconds.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=log_dir) as tmp:
        job_path, result_path = Path(tmp) / "job.json", Path(tmp) / "result.json"
        job_path.write_text(json.dumps(job))
        cmd = [sys.executable, "-m", "benchmarks.worker", str(job_path), str(result_path)]
        if profile_to is not None:
            cmd.append(str(profile_to))
        log_path = log_dir / f"{job['kind']}-{job.get('label', 'job')}.log"
        with open(log_path, "ab") as log:
            started = time.perf_counter()
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                    env=child_env())
            status, rusage = _wait(proc, timeout)
            wall = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status) if status is not None else None
        tail = _tail(log_path)
        if code != 0 or not result_path.exists():
            what = "timed out" if status is None else f"exited with {code}"
            raise BenchError(f"{job['kind']} job {what}; log {log_path}:\n{tail}")
        result = json.loads(result_path.read_text())
    peak = rusage.ru_maxrss / 1024 if rusage is not None else float("nan")  # KiB on Linux
    cpu = rusage.ru_utime + rusage.ru_stime if rusage is not None else float("nan")
    return ChildResult(result=result, peak_rss_mb=peak, wall_seconds=wall, cpu_seconds=cpu,
                       log=tail)


@dataclass
class ProcessRun:
    """One command's exit code, wall time, peak RSS and the tail of its output."""

    code: int | None
    wall_seconds: float
    peak_rss_mb: float
    tail: str


def run_process(cmd: Sequence[str], *, cwd: Path, env: dict[str, str], log_path: Path,
                timeout: float) -> ProcessRun:
    """Run `cmd` (its output appended to `log_path`), bounded by `timeout` seconds; its
    peak RSS (``ru_maxrss``) comes from ``os.wait4``. The code is None when it timed out."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        started = time.perf_counter()
        proc = subprocess.Popen(list(cmd), cwd=cwd, stdout=log, stderr=subprocess.STDOUT, env=env)
        status, rusage = _wait(proc, timeout)
        wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status) if status is not None else None
    peak = rusage.ru_maxrss / 1024 if rusage is not None else float("nan")  # KiB on Linux
    return ProcessRun(code=code, wall_seconds=wall, peak_rss_mb=peak, tail=_tail(log_path))


def _wait(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int | None, Any]:
    """Reap `proc` with wait4 (for its rusage); kill it after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while True:
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid == proc.pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return status, rusage
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            _, status, rusage = os.wait4(proc.pid, 0)
            proc.returncode = -9
            return None, rusage
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def median(values: Sequence[float]) -> float:
    """The median of `values` (NaN when empty)."""
    clean = [v for v in values if not math.isnan(v)]
    return statistics.median(clean) if clean else float("nan")


@dataclass
class Machine:
    """Where the figures were measured."""

    cpu: str
    cores: int
    ram_gb: float
    python: str
    versions: dict[str, str] = field(default_factory=dict)
    date: str = ""
    load_average: str = ""


def machine() -> Machine:
    """CPU model, cores, RAM, Python and library versions, date, load average."""
    cpu = platform.processor() or "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram = float("nan")
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = int(line.split()[1]) / 1024 / 1024
                break
    versions = {}
    for name in ("dlt", "duckdb", "httpx", "pyarrow", "uvicorn", "requests"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            versions[name] = metadata.version(name)
    load = ""
    with contextlib.suppress(OSError):
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    return Machine(cpu=cpu, cores=os.cpu_count() or 0, ram_gb=ram,
                   python=platform.python_version(), versions=versions,
                   date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
                   load_average=load)
