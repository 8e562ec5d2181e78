"""`diligence check`: can a sync run? Settings, credentials, namespaces, reading rights.

Like Airbyte's ``check``: it logs in, reads user-info, and for each namespace to sync
reads the connections list and each connection's detail (its reading rights), then
prints one line per finding. It loads no data and never opens the warehouse::

    ok  base URL https://service.example (TLS)
    ok  credentials accepted (password login)
    ok  namespace 8f1c...: 12 connections, 9 readable (14 questionnaires + document lists)
    ready: 2 namespaces, 24 connections, 18 readable

Requests: 2 + per namespace (1 + connections). A failure is raised as
:class:`CheckError`: one line, naming what to fix.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import httpx

from pipelines.company_connections import SourceSettings, run_coroutine
from pipelines.company_connections.errors import DeniedError, NotFoundError, SourceError

from ..errors import CheckError
from ..safe_text import terminal_text
from ..sync import _describe

__all__ = ["CheckError", "CheckReport", "NamespaceRights", "run_check"]


@dataclass
class NamespaceRights:
    """What one namespace can read."""

    namespace_company_id: str
    connections: int = 0
    #: connections with at least one company type received (their data is readable)
    readable: int = 0
    #: readable (company, company type) pairs, the namespace's own company types
    #: included: one questionnaire + its documents each
    readable_targets: int = 0
    #: connections whose detail was denied (403/404)
    denied: int = 0


@dataclass
class CheckReport:
    """The outcome of :func:`run_check`."""

    base_url: str
    auth: str
    available: list[str]
    namespaces: list[NamespaceRights] = field(default_factory=list)


def _origin(base_url: str) -> str:
    url = httpx.URL(base_url)
    return f"{url.scheme}://{url.netloc.decode('ascii', 'replace')}{url.path.rstrip('/')}"


async def _rights(client: Any, namespace: str, own_types: int) -> NamespaceRights:
    rights = NamespaceRights(namespace, readable_targets=own_types)
    entries = await client.connections(namespace)
    rights.connections = len(entries)

    async def one(company_id: str) -> None:
        try:
            detail = await client.connection(namespace, company_id)
        except (DeniedError, NotFoundError):
            rights.denied += 1
            return
        received = set(detail.reading_rights.received.company_type_ids)
        if received:
            rights.readable += 1
            rights.readable_targets += len(received)

    await asyncio.gather(*(one(entry.id) for entry in {e.id: e for e in entries}.values()))
    return rights


async def _check(settings: SourceSettings) -> CheckReport:
    async with settings.client() as client:
        auth = "password login" if settings.password else "access token"
        if settings.password:
            await client.login()
        info = await client.user_info()
        available = list(dict.fromkeys(info.company_ids))
        wanted = list(dict.fromkeys(settings.namespaces or available))
        unknown = [ns for ns in wanted if ns not in available]
        if unknown:
            raise CheckError(
                f"namespace {', '.join(unknown)} is not one of the user's companies "
                f"(user-info lists: {', '.join(available) or 'none'})"
            )
        if not wanted:
            raise CheckError("user-info lists no company: these credentials can read nothing")
        report = CheckReport(base_url=_origin(settings.base_url), auth=auth, available=available)
        own = {
            role.company_id: len(dict.fromkeys(role.internal.company_type_ids)) for role in info.roles
        }
        report.namespaces = list(
            await asyncio.gather(*(_rights(client, ns, own.get(ns, 0)) for ns in wanted))
        )
        return report


def run_check(settings: SourceSettings) -> CheckReport:
    """Log in with `settings`, read user-info and every namespace's reading rights.

    Raises :class:`CheckError` (one line) when something would stop a sync.
    """
    try:
        return run_coroutine(_check(settings))
    except CheckError:
        raise
    except SourceError as exc:
        raise CheckError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - one clear line, as a sync would print it
        raise CheckError(_describe(exc)) from exc


def report_lines(report: CheckReport) -> list[str]:
    """The lines `diligence check` prints for a passing check (upstream text in them
    has its control characters escaped; print them without markup)."""
    lines = [f"ok  base URL {terminal_text(report.base_url)}", f"ok  credentials accepted ({report.auth})"]
    for ns in report.namespaces:
        denied = f", {ns.denied} denied" if ns.denied else ""
        lines.append(
            f"ok  namespace {terminal_text(ns.namespace_company_id)}: {ns.connections} connections, "
            f"{ns.readable} readable ({ns.readable_targets} questionnaires with their documents){denied}"
        )
    connections = sum(ns.connections for ns in report.namespaces)
    readable = sum(ns.readable for ns in report.namespaces)
    lines.append(
        f"ready: {len(report.namespaces)} namespaces, {connections} connections, {readable} readable; "
        "nothing was loaded"
    )
    return lines
