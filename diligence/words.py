"""How counts are said: ``1 sync``, ``2 syncs``, ``1,204 responses``.

One function, so every line of every command counts alike (thousands separated, the
plural only where it belongs)."""

from __future__ import annotations

__all__ = ["counted"]

#: plurals that are not the singular with an ``s``
_IRREGULAR = {"company": "companies", "counterparty": "counterparties", "entry": "entries",
              "sync issue": "sync issues", "row version": "row versions", "is": "are"}


def counted(number: int, singular: str, plural: str | None = None) -> str:
    """`number` and the noun for it: ``counted(1, "sync")`` is ``1 sync``,
    ``counted(1204, "response")`` is ``1,204 responses``."""
    noun = singular if number == 1 else plural or _IRREGULAR.get(singular) or f"{singular}s"
    return f"{number:,} {noun}"
