"""A faithful local stand-in for the company-connections service.

A real HTTP server on 127.0.0.1 implementing the service's 11 endpoints with
its auth, namespace and reading-rights rules, over deterministic data at three
scales, with switchable faults and admin routes exposing the ground truth.
It stands in for the service, so it lives beside ``diligence`` and imports
nothing from it.

- :mod:`~sandbox.data`: :func:`build_world` (what exists: companies, namespaces, rights)
- :mod:`~sandbox.world`: :class:`World`, the state the routes read
- :mod:`~sandbox.generate`: what each company, questionnaire and document looks like
- :mod:`~sandbox.truth`: the ground truth a full sync must reproduce
- :mod:`~sandbox.faults`: :class:`Faults` switches and their injection
- :mod:`~sandbox.auth`: Basic login, JWTs, renewal and revocation
- :mod:`~sandbox.app`: the ASGI app (:func:`create_app`)
- :mod:`~sandbox.admin`: ``/_sandbox/`` routes
- :mod:`~sandbox.server`: :class:`SandboxServer` (thread) and :func:`serve` (foreground)
- :mod:`~sandbox.vocab`: the fixed word lists the data is drawn from
- :mod:`~sandbox.loadcheck`: ``python -m sandbox.loadcheck`` throughput check
"""

from __future__ import annotations

from sandbox.app import create_app
from sandbox.data import build_world
from sandbox.faults import Faults
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer, serve
from sandbox.world import World

__all__ = [
    "DEFAULT_EMAIL",
    "DEFAULT_PASSWORD",
    "Faults",
    "SandboxServer",
    "World",
    "build_world",
    "create_app",
    "serve",
]
