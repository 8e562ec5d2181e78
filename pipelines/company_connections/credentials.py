"""Look up the source's secrets outside the source, without leaving them in dlt's files.

dlt records every value it resolves in the pipeline's trace (``trace.pickle`` in the
pipelines dir), except values resolved with a *secret* type hint. A lookup such as
``dlt.secrets.get(key, str)`` is therefore written to disk in clear text on the next
pipeline run. Every lookup of a secret outside the source's own signature goes
through :func:`configured_secret`, which asks without a type, so that dlt uses the
default hint of ``dlt.secrets`` (a secret one).
"""

from __future__ import annotations

import dlt

SOURCE_SECTION = "sources.company_connections"
#: the source's settings whose values are secrets (masked wherever they appear)
CREDENTIALS = ("password", "access_token")


def configured_secret(key: str) -> str | None:
    """`sources.company_connections.<key>` from dlt secrets or env, or None.

    Resolved with a secret hint, so dlt's trace records that the key was resolved,
    never its value.
    """
    try:
        # no expected type: dlt.secrets' default hint (TSecretValue) keeps it out of the trace
        value = dlt.secrets.get(f"{SOURCE_SECTION}.{key}")
    except Exception:  # noqa: BLE001 - an unreadable value counts as not configured
        return None
    return str(value) if value else None
