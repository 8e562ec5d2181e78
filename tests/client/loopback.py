"""A real HTTP server on 127.0.0.1 (uvicorn in a thread) and a rate-limited app."""

from __future__ import annotations

import math
import socket
import threading
import time
from collections import Counter
from types import TracebackType
from typing import Self

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


class LoopbackServer:
    """Serve an ASGI app on 127.0.0.1 on a free port for the duration of a `with`."""

    def __init__(self, app: object) -> None:
        self.app = app
        self.url = ""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> Self:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(self.app, log_level="warning", access_log=False,
                                lifespan="off", loop="asyncio", http="h11")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]},
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("loopback server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        assert self._server is not None and self._thread is not None
        self._server.should_exit = True
        self._thread.join(timeout=10)


class RateLimitedService:
    """Endpoints 1 and 4 behind a token bucket (`rate` per second, bucket `burst`);
    beyond it 429 with ``Retry-After`` in whole seconds, as the sandbox does."""

    def __init__(self, rate: float, burst: float | None = None) -> None:
        self.rate = rate
        self.burst = burst or rate
        self.tokens = self.burst
        self.stamp = time.monotonic()
        self.statuses: Counter[int] = Counter()
        self.app = Starlette(routes=[
            Route("/api/auth", self.login, methods=["POST"]),
            Route("/api/companies/{company_id}", self.company),
        ])

    def _take(self) -> int | None:
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return None
        return max(1, math.ceil((1 - self.tokens) / self.rate))

    def _limited(self) -> Response | None:
        wait = self._take()
        if wait is None:
            return None
        self.statuses[429] += 1
        return JSONResponse({"error": "too many requests"}, status_code=429,
                            headers={"Retry-After": str(wait)})

    async def login(self, request: Request) -> Response:
        limited = self._limited()
        if limited is not None:
            return limited
        self.statuses[200] += 1
        return JSONResponse({"token": "loopback-token"})

    async def company(self, request: Request) -> Response:
        limited = self._limited()
        if limited is not None:
            return limited
        self.statuses[200] += 1
        return JSONResponse({"id": request.path_params["company_id"]})
