"""The one way to hide a secret: :func:`redact`, used by the source's errors, the CLI's
logs and messages, the warehouse's errors, the bucket transport and the flows.

It hides every value it is given, and anything shaped like a secret: a JWT, a
``Bearer``/``Basic`` credential, the value of a key named in :data:`SECRET_KEYS`
(``password=…``, ``"access_token": "…"``, a conninfo's ``sslpassword='…'``), and the
password of a URL's userinfo (``postgres://user:…@host``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["HIDDEN", "SECRET_KEYS", "redact"]

HIDDEN = "***"

#: keys whose values are secrets wherever they appear: a conninfo, JSON, a settings
#: line, an error message (matched case-insensitively; ``_`` optional)
SECRET_KEYS = ("password", "sslpassword", "access_token", "token", "jwt", "authorization",
               "secret_access_key", "session_token")

_JWT = re.compile(r"eyJ[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]{2,}\.[A-Za-z0-9_-]*")
_AUTH_SCHEME = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]+", re.IGNORECASE)
_KEYS = "|".join(key.replace("_", "_?") for key in SECRET_KEYS)
_KEY_VALUE = re.compile(
    rf"""(["']?\b(?:\w*_)?(?:{_KEYS})["']?\s*[:=]\s*)"""  # the key, its quotes, and = or :
    r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^"'\s,}&]+)""",  # a quoted value whole, or a bare one
    re.IGNORECASE,
)
_USERINFO = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^:/@\s]*:)[^@\s]*@", re.IGNORECASE)


def redact(text: str, secrets: Iterable[str | None] = ()) -> str:
    """`text` with each non-empty string of `secrets` and anything secret-shaped (see
    the module docstring) replaced by ``***``."""
    text = _JWT.sub(HIDDEN, text)
    text = _AUTH_SCHEME.sub(lambda m: f"{m.group(1)} {HIDDEN}", text)
    text = _KEY_VALUE.sub(lambda m: m.group(1) + (m.group(2)[0] + HIDDEN + m.group(2)[0]
                                                    if m.group(2)[0] in "'\"" else HIDDEN), text)
    text = _USERINFO.sub(rf"\1{HIDDEN}@", text)
    for secret in secrets:  # after the shapes: a short secret inside a credential hides it whole
        if secret:
            text = text.replace(secret, HIDDEN)
    return text
