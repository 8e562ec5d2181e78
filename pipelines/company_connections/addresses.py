"""Where a document download may connect: public addresses, checked after resolving.

A signed document URL (and every redirect it leads to) comes from the service, so
it could point into the network the sync runs in: a cloud metadata address
(169.254.169.254), a router, a database. `check_download_address` resolves the host
and refuses the download when any address it resolves to is not public:

=======================================  ============================================
address                                  allowed when
=======================================  ============================================
public (``is_global``)                   always
loopback (127/8, ::1)                    the service's own `base_url` is on loopback
                                         (the sandbox, tests, a local service), or
                                         `allow_private_downloads`
private, link-local (169.254/16,         `allow_private_downloads`
fe80::/10), shared (100.64/10),
unspecified, multicast, reserved
=======================================  ============================================

A host that does not resolve is left to the transport, which reports it as any
connection failure. The check runs before each request (the first and every
redirect); the transport resolves the name again when it connects, so a name whose
answer changes in between (DNS rebinding) is not covered: set a resolver you trust.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

import httpx

from .errors import ResponseFormatError
from .urls import path_of

__all__ = ["check_download_address", "address_kind"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def address_kind(address: IPAddress) -> str:
    """``public``, ``loopback``, ``link-local`` or ``private`` (every other non-public)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_global and not address.is_multicast:
        return "public"
    return "private"


async def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:  # does not resolve: the transport says so when it connects
        return []
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


async def check_download_address(url: httpx.URL, *, allow_private: bool, allow_loopback: bool) -> None:
    """Raise `ResponseFormatError` if `url`'s host resolves to an address not allowed
    (see the module's table); the message names the host, never the URL's query."""
    port = url.port or (443 if url.scheme == "https" else 80)
    host = url.host.strip("[]")
    for address in await _resolve(host, port):
        kind = address_kind(address)
        if kind == "public" or allow_private or (kind == "loopback" and allow_loopback):
            continue
        raise ResponseFormatError(
            f"refusing to download from {host!r}: it resolves to a {kind} address ({address}); "
            "set allow_private_downloads = true under [sources.company_connections] if documents "
            "are served from your own network",
            method="GET", path=path_of(url))
