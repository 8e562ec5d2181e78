"""One-line hints for failures that come from outside the project (Prefect, the OS).

:func:`hint_for` looks through an error's chain for a known message and returns the
one line to print instead of the raw error (which may run to pages: Prefect's
ephemeral-server timeout appends the server's whole stdout and stderr).
"""

from __future__ import annotations

from ..errors import error_chain

__all__ = ["hint_for"]

EPHEMERAL_TIMEOUT = (
    "Prefect's temporary (ephemeral) API server did not start in time: point "
    "PREFECT_API_URL at a running Prefect server (e.g. `prefect server start`), or allow "
    "it longer with PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS=60"
)

_KNOWN = (
    ("attempting to connect to ephemeral Prefect API server", EPHEMERAL_TIMEOUT),
    ("ephemeral Prefect API server", EPHEMERAL_TIMEOUT),
)


def hint_for(exc: BaseException) -> str | None:
    """The one-line hint for `exc` (or anything in its chain), None when none is known."""
    for error in error_chain(exc):
        text = str(error)
        for needle, hint in _KNOWN:
            if needle in text:
                return hint
    return None
