"""A faithful local stand-in for the company-connections service.

A real HTTP server on 127.0.0.1 implementing the service's 11 endpoints with
its auth, namespace and reading-rights rules, over deterministic data at three
scales, with switchable faults and admin routes exposing the ground truth.

- :mod:`~diligence.sandbox.data`: :func:`build_world`, :class:`World` (what exists)
- :mod:`~diligence.sandbox.generate`: what each company, questionnaire and document looks like
- :mod:`~diligence.sandbox.truth`: the ground truth a full sync must reproduce
- :mod:`~diligence.sandbox.faults`: :class:`Faults` switches and their injection
- :mod:`~diligence.sandbox.auth`: Basic login, JWTs, renewal and revocation
- :mod:`~diligence.sandbox.app`: the ASGI app (:func:`create_app`)
- :mod:`~diligence.sandbox.admin`: ``/_sandbox/`` routes
- :mod:`~diligence.sandbox.server`: :class:`SandboxServer` (thread) and :func:`serve` (foreground)
- :mod:`~diligence.sandbox.vocab`: the fixed word lists the data is drawn from
- :mod:`~diligence.sandbox.loadcheck`: ``python -m diligence.sandbox.loadcheck`` throughput check
"""

from __future__ import annotations

from diligence.sandbox.app import create_app
from diligence.sandbox.data import World, build_world
from diligence.sandbox.faults import Faults
from diligence.sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer, serve

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
