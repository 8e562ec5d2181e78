"""An S3-compatible server for the tests: moto in server mode (in memory) on 127.0.0.1,
reached through a loopback TCP relay that a test can stop and start again, as a bucket
that goes away mid-load and comes back with its objects (moto keeps them: only the relay
stops)."""

from __future__ import annotations

import contextlib
import os
import secrets
import selectors
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.processes import free_port, stop

START_TIMEOUT_SECONDS = 60
MOTO = Path(sys.executable).with_name("moto_server")


class Relay:
    """Forwards 127.0.0.1:`port` to `target`; :meth:`stop` closes the port and every
    connection through it (clients then see a refused connection), :meth:`start` opens
    it again."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._running = threading.Event()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        self._running.set()
        thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        self._running.clear()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            for sock in list(self._sockets):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while self._running.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.update((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, one: socket.socket, other: socket.socket) -> None:
        selector = selectors.DefaultSelector()
        try:
            # stop() may have closed the pair already (a closed socket's fd is -1: ValueError)
            selector.register(one, selectors.EVENT_READ, other)
            selector.register(other, selectors.EVENT_READ, one)
            while self._running.is_set():
                for key, _ in selector.select(timeout=0.5):
                    data = key.fileobj.recv(1 << 16)  # type: ignore[union-attr]
                    if not data:
                        return
                    key.data.sendall(data)
        except (OSError, ValueError):
            return
        finally:
            selector.close()
            with self._lock:
                for sock in (one, other):
                    self._sockets.discard(sock)
                    sock.close()


@dataclass
class ObjectStore:
    """A running moto server, its relay, and one bucket with fresh credentials."""

    process: subprocess.Popen[bytes]
    relay: Relay
    bucket: str
    key_id: str = field(default_factory=lambda: "AKIA" + secrets.token_hex(8).upper())
    secret: str = field(default_factory=lambda: "s3-" + secrets.token_urlsafe(24), repr=False)
    region: str = "eu-central-1"

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.relay.port}"

    def env(self) -> dict[str, str]:
        """The standard variables a worker or analyst sets."""
        return {"AWS_ACCESS_KEY_ID": self.key_id, "AWS_SECRET_ACCESS_KEY": self.secret,
                "AWS_REGION": self.region, "AWS_ENDPOINT_URL": self.endpoint}

    def url(self, prefix: str) -> str:
        return f"s3://{self.bucket}/{prefix.strip('/')}/"

    def client(self):  # noqa: ANN201 - a boto3 client
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=self.key_id,
                            aws_secret_access_key=self.secret, region_name=self.region)

    def keys(self, prefix: str = "") -> list[str]:
        client = self.client()
        found: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix):
            found += [item["Key"] for item in page.get("Contents", [])]
        return found


@contextlib.contextmanager
def object_store(log: Path) -> Iterator[ObjectStore]:
    """moto on 127.0.0.1 behind a :class:`Relay`, with one bucket; stopped afterwards."""
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen([str(MOTO), "-H", "127.0.0.1", "-p", str(port)],
                                   stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                   env={**os.environ, "MOTO_ALLOW_NONEXISTENT_REGION": "true"})
    relay = Relay(port)
    relay.start()
    store = ObjectStore(process, relay, bucket=f"lake-{secrets.token_hex(4)}")
    try:
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/moto-api/", timeout=2)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"moto_server did not start: {log.read_text()[-2000:]}") from None
                time.sleep(0.2)
        store.client().create_bucket(
            Bucket=store.bucket, CreateBucketConfiguration={"LocationConstraint": store.region})
        yield store
    finally:
        relay.stop()
        stop(process)
