"""Which namespaces a sync reads: one rule, asked by the source, the CLI and both flows.

::

    asked (the parameter, else the configured `namespaces`)
        -> those ids, each either listed by user-info or synced before
           (an id that is neither is a mistake: UnknownNamespaceError, nothing recorded)
    nothing asked
        -> every company of user-info, then every namespace synced before

A namespace synced before that user-info no longer lists stays in the plan: its read
fails loudly (access lost), instead of its data silently going stale.
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import UnknownNamespaceError

__all__ = ["plan_namespaces"]


def plan_namespaces(
    asked: Sequence[str] | None, available: Sequence[str], synced: Sequence[str] = ()
) -> list[str]:
    """The namespaces to read, in order, each once (see the module docstring).

    `asked` is the caller's list (a parameter, else the configured one), `available`
    the companies of user-info, `synced` the namespaces an earlier sync loaded.
    Raises :class:`UnknownNamespaceError` naming every asked id that is neither.
    """
    if not asked:
        return list(dict.fromkeys([*available, *synced]))
    wanted = list(dict.fromkeys(str(ns) for ns in asked))
    known = {*available, *synced}
    unknown = [ns for ns in wanted if ns not in known]
    if unknown:
        raise UnknownNamespaceError(unknown, list(dict.fromkeys(available)))
    return wanted
