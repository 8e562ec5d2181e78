"""Throughput check: ``python -m sandbox.loadcheck --seconds 5``.

Starts the sandbox in a subprocess (so server and client do not share a
core), then drives it with ``httpx.AsyncClient`` workers at a fixed
concurrency over a mix of endpoints 3-11 for a number of seconds, and prints
requests per second with the status counts, plus the sandbox's own CPU time
per request (Linux), which gives its capacity independent of the client.

Two client transports are measured (``--transport``):

- ``httpcore``: httpx's stock transport, as the pipeline's client uses it.
  On a small machine this client, not the sandbox, is the bottleneck (it
  spends most of its CPU in httpcore and anyio).
- ``lean``: the same ``httpx.AsyncClient`` API over :class:`LeanTransport`,
  one raw keep-alive connection per worker parsed with httptools, which shows
  what the sandbox itself sustains.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import multiprocessing
import os
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import httptools
import httpx

from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD

_READY = re.compile(r"Sandbox ready at (http://\S+)")


@dataclass
class LoadResult:
    """Outcome of one load run."""

    requests: int
    seconds: float
    statuses: Counter[int]

    @property
    def per_second(self) -> float:
        """Completed requests per second."""
        return self.requests / self.seconds if self.seconds else 0.0


class LeanTransport(httpx.AsyncBaseTransport):
    """A minimal HTTP/1.1 transport: one keep-alive connection, one request at a
    time, bodiless requests only. For load generation, not for general use."""

    def __init__(self) -> None:
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self._writer is None or self._reader is None:
            self._reader, self._writer = await asyncio.open_connection(
                request.url.host, request.url.port)
        head = [f"{request.method} {request.url.raw_path.decode()} HTTP/1.1"]
        head += [f"{k.decode()}: {v.decode()}" for k, v in request.headers.raw]
        self._writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        headers: list[tuple[bytes, bytes]] = []
        body: list[bytes] = []
        done: list[bool] = []

        class _Callbacks:
            def on_header(self, name: bytes, value: bytes) -> None:
                headers.append((name, value))

            def on_body(self, chunk: bytes) -> None:
                body.append(chunk)

            def on_message_complete(self) -> None:
                done.append(True)

        parser = httptools.HttpResponseParser(_Callbacks())
        while not done:
            data = await self._reader.read(65536)
            if not data:
                self._writer = self._reader = None
                raise httpx.RemoteProtocolError("server closed the connection", request=request)
            parser.feed_data(data)
        return httpx.Response(parser.get_status_code(), headers=headers, content=b"".join(body))

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = self._reader = None


@contextlib.contextmanager
def sandbox_subprocess(scale: str = "small", seed: int = 7,
                       extra: Sequence[str] = ()) -> Iterator[tuple[str, int]]:
    """Run ``python -m sandbox --port 0``; yield (base URL, process id)."""
    cmd = [sys.executable, "-m", "sandbox", "--port", "0", "--scale", scale,
           "--seed", str(seed), *extra]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env=env)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = _READY.search(line)
        if match is None:
            raise RuntimeError(f"sandbox did not start: {line!r}")
        yield match.group(1), proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def request_mix(base_url: str) -> Mix:
    """Paths over endpoints 3-11 (with their headers) for every namespace."""
    with httpx.Client(base_url=base_url, timeout=30) as client:
        token = client.post("/api/auth", auth=(DEFAULT_EMAIL, DEFAULT_PASSWORD)).json()["token"]
        bearer = {"Authorization": f"Bearer {token}"}
        truth = client.get("/_sandbox/truth").json()
        mix: Mix = [("/api/auth/user-info", bearer)]
        for ns_id, t in truth["per_namespace"].items():
            headers = {**bearer, "x-namespace": f"/api/company/{ns_id}"}
            mix.append((f"/api/companies/{ns_id}", headers))
            mix.append(("/api/companies/connections", headers))
            for company_id in t["connection_ids"][:20]:
                mix.append((f"/api/companies/{company_id}", headers))
                mix.append((f"/api/companies/connections/{company_id}", headers))
            for company_id, type_id in t["questionnaires"][:20]:
                mix.append((f"/api/companies/{company_id}/type/{type_id}/questionnaires", headers))
                mix.append((f"/api/companies/{company_id}/company-types/{type_id}/documents",
                            headers))
            for type_id in t["template_type_ids"]:
                mix.append((f"/api/company-type/{type_id}/questionnaires", headers))
            company_id, type_id = t["questionnaires"][0]
            body = client.get(f"/api/companies/{company_id}/type/{type_id}/questionnaires",
                              headers=headers).json()
            for form in body["questionnaires"]["forms"]:
                mix.extend((f"/api/companies/{company_id}/field/{field['id']}/information", headers)
                           for field in form["fields"] if "information" in field)
            for company_id, type_id in t["questionnaires"][:10]:
                docs = client.get(f"/api/companies/{company_id}/company-types/{type_id}/documents",
                                  headers=headers).json()
                mix.extend((f"/api/documents/{d['id']}/url", headers) for d in docs)
    return mix


Mix = list[tuple[str, dict[str, str]]]


async def run_load(base_url: str, mix: Mix, seconds: float, concurrency: int,
                   transport: str = "httpcore", offset: int = 0,
                   start_at: float | None = None) -> LoadResult:
    """Drive ``base_url`` with ``concurrency`` workers for ``seconds``.

    Each worker owns an ``httpx.AsyncClient`` with one keep-alive connection
    and pre-built requests (a single client shared by many workers spends most
    of its time scanning its connection pool, which would measure httpcore
    rather than the sandbox). ``start_at`` (a ``time.time()`` value) lets
    several processes load the sandbox during the same window.
    """
    statuses: Counter[int] = Counter()
    requests = [httpx.Request("GET", base_url.rstrip("/") + path, headers=headers)
                for path, headers in mix]
    if start_at is not None:
        await asyncio.sleep(max(0.0, start_at - time.time()))
    deadline = time.perf_counter() + seconds

    async def worker(index: int) -> None:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        lean = LeanTransport() if transport == "lean" else None
        async with httpx.AsyncClient(limits=limits, timeout=30, transport=lean) as client:
            start = (offset + index * 7) % len(requests)
            for request in itertools.islice(itertools.cycle(requests), start, None):
                if time.perf_counter() >= deadline:
                    break
                response = await client.send(request)
                statuses[response.status_code] += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(i) for i in range(concurrency)))
    return LoadResult(sum(statuses.values()), time.perf_counter() - started, statuses)


def _process_main(args: tuple[str, Mix, float, int, str, int, float]) -> LoadResult:
    base_url, mix, seconds, concurrency, transport, offset, start_at = args
    try:
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    except ImportError:  # pragma: no cover - uvloop comes with uvicorn[standard]
        runner = asyncio.Runner()
    with runner:
        return runner.run(run_load(base_url, mix, seconds, concurrency, transport, offset,
                                   start_at))


def load(base_url: str, seconds: float = 5.0, concurrency: int = 32, processes: int = 1,
         transport: str = "httpcore", mix: Mix | None = None) -> LoadResult:
    """Split ``concurrency`` workers over ``processes`` client processes that load
    the sandbox during the same ``seconds``-long window; merge their results."""
    mix = mix if mix is not None else request_mix(base_url)
    shares = [concurrency // processes + (1 if i < concurrency % processes else 0)
              for i in range(processes)]
    if processes <= 1:
        return _process_main((base_url, mix, seconds, concurrency, transport, 0, time.time()))
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        start_at = time.time() + 2.0  # time for the worker processes to import
        jobs = [(base_url, mix, seconds, share, transport, i * 31, start_at)
                for i, share in enumerate(shares) if share]
        results = pool.map(_process_main, jobs, chunksize=1)
    statuses: Counter[int] = Counter()
    for result in results:
        statuses.update(result.statuses)
    return LoadResult(sum(statuses.values()), max(r.seconds for r in results), statuses)


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (Linux /proc), or None."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments, run the load, print requests per second."""
    parser = argparse.ArgumentParser(prog="python -m sandbox.loadcheck",
                                     description="Measure the sandbox's throughput.")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each load run")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight")
    parser.add_argument("--processes", type=int, default=2,
                        help="client processes the concurrency is split over")
    parser.add_argument("--transport", choices=("both", "httpcore", "lean"), default="both",
                        help="client transport(s) to measure, one run each")
    parser.add_argument("--scale", default="small", help="sandbox data scale")
    parser.add_argument("--seed", type=int, default=7, help="sandbox data seed")
    parser.add_argument("--url", default=None,
                        help="load an already running sandbox instead of starting one")
    args = parser.parse_args(argv)
    transports = ("httpcore", "lean") if args.transport == "both" else (args.transport,)

    def run(base_url: str, pid: int | None) -> None:
        mix = request_mix(base_url)
        for transport in transports:
            before = _cpu_seconds(pid) if pid else None
            result = load(base_url, args.seconds, args.concurrency, args.processes, transport, mix)
            after = _cpu_seconds(pid) if pid else None
            codes = ", ".join(f"{code}: {n}" for code, n in sorted(result.statuses.items()))
            print(f"[{transport}] {result.requests} requests in {result.seconds:.1f} s at "
                  f"concurrency {args.concurrency}, {args.processes} client process(es): "
                  f"{result.per_second:,.0f} requests/s ({codes})")
            if before is not None and after is not None and after > before:
                per_request_ms = (after - before) * 1000 / max(1, result.requests)
                print(f"[{transport}] sandbox CPU {per_request_ms:.3f} ms per request "
                      f"(capacity about {1000 / per_request_ms:,.0f} requests/s per core)")

    if args.url:
        run(args.url, None)
    else:
        with sandbox_subprocess(args.scale, args.seed) as (base_url, pid):
            run(base_url, pid)


if __name__ == "__main__":
    main()
