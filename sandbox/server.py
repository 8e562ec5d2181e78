"""Running the sandbox: in a background thread (:class:`SandboxServer`) or in the
foreground (:func:`serve`, used by ``python -m sandbox`` and the CLI).

Both serve the ASGI app with uvicorn on uvloop and httptools, without access
logs. Binding the socket before uvicorn starts lets port 0 pick a free port
whose number is known at once.
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
import time
from datetime import date
from types import TracebackType
from typing import Any, Self, TextIO

import uvicorn

from sandbox.app import SandboxApp, create_app
from sandbox.data import build_world
from sandbox.faults import Faults
from sandbox.world import World

DEFAULT_EMAIL = "analyst@example.com"
DEFAULT_PASSWORD = "sandbox-password"
DEFAULT_PORT = 8765

_RESET_MESSAGE = "ASGI callable returned without completing response."


class _InjectedResetFilter(logging.Filter):
    """Hide uvicorn's complaint about the responses the reset fault cuts short."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _RESET_MESSAGE


def _quiet_injected_resets() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _InjectedResetFilter) for f in logger.filters):
        logger.addFilter(_InjectedResetFilter())


class _Server(uvicorn.Server):
    """uvicorn server that calls ``on_ready`` once it accepts connections."""

    def __init__(self, config: uvicorn.Config, on_ready: Any = None) -> None:
        super().__init__(config)
        self._on_ready = on_ready

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and self._on_ready is not None:
            self._on_ready()


def uvicorn_config(app: SandboxApp, *, log_config: Any = None) -> uvicorn.Config:
    """The fast uvicorn settings the sandbox runs with."""
    return uvicorn.Config(app, loop="uvloop", http="httptools", ws="none", lifespan="on",
                          access_log=False, log_level="warning", log_config=log_config,
                          timeout_keep_alive=30, backlog=2048)


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def ready_line(base_url: str, world: World, email: str, password: str) -> str:
    """The one line printed when the sandbox is up; only the sandbox's own
    default password is ever printed."""
    shown = password if password == DEFAULT_PASSWORD else "(custom password)"
    sized = f", {world.connections} connections" if world.connections is not None else ""
    return (f"Sandbox ready at {base_url} (scale={world.scale}{sized}, seed={world.seed}"
            f"{', drift' if world.drift else ''}{', hostile' if world.hostile else ''}) — login {email} / {shown}")


class SandboxServer:
    """The sandbox in a background thread; ``start()`` returns once it accepts connections.

    ``faults`` is shared with the app: mutating ``server.faults`` takes effect
    on the next request. Usable as a context manager.
    """

    def __init__(self, scale: str = "small", seed: int = 7, drift: bool = False,
                 faults: Faults | None = None, port: int = 0, email: str = DEFAULT_EMAIL,
                 password: str = DEFAULT_PASSWORD, page_size: int | None = None,
                 url_ttl_seconds: float = 60, *, host: str = "127.0.0.1",
                 today: date | None = None, renew_expired: bool = False,
                 world: World | None = None, hostile: bool = False,
                 connections: int | None = None) -> None:
        self.world = world if world is not None else build_world(scale, seed, drift, today, hostile,
                                                                 connections)
        self.faults = faults if faults is not None else Faults()
        self.email = email
        self.password = password
        self.host = host
        self.port = port
        self.app = create_app(self.world, self.faults, email=email, password=password,
                              url_ttl_seconds=url_ttl_seconds, page_size=page_size,
                              renew_expired=renew_expired)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._sock: socket.socket | None = None

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` (valid after :meth:`start`)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 15.0) -> SandboxServer:
        """Start serving in a daemon thread; raise RuntimeError if it does not come up."""
        if self._thread is not None:
            return self
        _quiet_injected_resets()
        self._sock = _bind(self.host, self.port)
        self.port = self._sock.getsockname()[1]
        ready = threading.Event()
        self._server = _Server(uvicorn_config(self.app), on_ready=ready.set)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name=f"sandbox-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.02):
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("sandbox server failed to start")
        return self

    def stop(self) -> None:
        """Stop serving and wait for the thread to end."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
            if self._thread.is_alive() and self._server is not None:
                self._server.force_exit = True
                self._thread.join(timeout=5)
        if self._sock is not None:
            self._sock.close()
        self._server = self._thread = self._sock = None

    def invalidate_tokens(self) -> int:
        """Revoke every token issued so far (as ``POST /_sandbox/invalidate-tokens``)."""
        return self.app.auth.revoke_all()

    def truth(self) -> dict[str, Any]:
        """The world's ground truth (as ``GET /_sandbox/truth``)."""
        return self.world.truth()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def serve(port: int = DEFAULT_PORT, host: str = "127.0.0.1", *, scale: str = "small",
          seed: int = 7, drift: bool = False, faults: Faults | None = None,
          email: str = DEFAULT_EMAIL, password: str = DEFAULT_PASSWORD,
          page_size: int | None = None, url_ttl_seconds: float = 60,
          today: date | None = None, renew_expired: bool = False,
          out: TextIO | None = None, hostile: bool = False,
          connections: int | None = None) -> None:
    """Serve the sandbox in the foreground until interrupted (Ctrl+C / SIGTERM).

    Prints :func:`ready_line` to ``out`` (default stdout) once connections are
    accepted; port 0 picks a free port and the line shows which.
    """
    world = build_world(scale, seed, drift, today, hostile, connections)
    app = create_app(world, faults if faults is not None else Faults(), email=email,
                     password=password, url_ttl_seconds=url_ttl_seconds, page_size=page_size,
                     renew_expired=renew_expired)
    sock = _bind(host, port)
    bound_port = sock.getsockname()[1]
    shown_host = f"[{host}]" if ":" in host else host
    base_url = f"http://{shown_host}:{bound_port}"
    stream = out or sys.stdout

    def announce() -> None:
        print(ready_line(base_url, world, email, password), file=stream, flush=True)

    config = uvicorn_config(app, log_config=uvicorn.config.LOGGING_CONFIG)
    _quiet_injected_resets()
    try:
        _Server(config, on_ready=announce).run(sockets=[sock])
    finally:
        sock.close()
