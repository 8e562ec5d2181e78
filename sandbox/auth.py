"""Token authentication of the sandbox: Basic login, HS256 JWTs, renewal, revocation.

Tokens carry ``sub`` (the e-mail), ``iat``, ``exp`` and a unique ``jti``.
``iat`` and ``exp`` are whole seconds (``exp = iat + lifetime``); the server
itself measures expiry from the exact issue time, so a token is accepted for
the full lifetime even though its ``iat`` was rounded down.
Renewing a token revokes its ``jti``; :meth:`TokenAuthority.revoke_all`
revokes every token issued so far (as if another process had renewed). Decoded
tokens are memoised by their text, so checking a known token costs a dict
lookup, an expiry comparison and a set membership test.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
import time
import uuid
from dataclasses import dataclass

import jwt

DEFAULT_TOKEN_LIFETIME = 7 * 24 * 3600
_MEMO_LIMIT = 50_000


@dataclass(frozen=True)
class Claims:
    """The claims the sandbox relies on."""

    sub: str
    jti: str
    iat: int
    exp: int


class AuthError(Exception):
    """A credential or token was rejected; ``str(exc)`` is the 401 message."""


class TokenAuthority:
    """Issues and checks the sandbox's tokens for one account.

    ``renew_expired`` lets endpoint 2 renew an expired (but otherwise valid,
    unrevoked) token, a reading of the spec's "after expiry ... renews the
    existing token"; by default an expired token is rejected everywhere.
    """

    def __init__(self, email: str, password: str, *, secret: bytes | None = None,
                 renew_expired: bool = False) -> None:
        self.email = email
        self._password = password
        self._secret = secret or secrets.token_bytes(32)
        self.renew_expired = renew_expired
        self._issued: set[str] = set()
        self._revoked: set[str] = set()
        self._memo: dict[str, Claims] = {}
        self._expires_at: dict[str, float] = {}
        self._uses: dict[str, int] = {}
        #: every token issued, in order (the secret-scan tests look for each one at rest)
        self.tokens_issued: list[str] = []

    # ------------------------------------------------------------ login

    def check_basic(self, authorization: str | None) -> None:
        """Accept ``Basic base64(email:password)`` for the account, else raise AuthError."""
        if not authorization:
            raise AuthError("Missing Authorization header")
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() != "basic" or not value.strip():
            raise AuthError("Basic authentication required")
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError) as exc:
            raise AuthError("Malformed Basic credentials") from exc
        email, sep, password = decoded.partition(":")
        ok_email = hmac.compare_digest(email.encode(), self.email.encode())
        ok_password = hmac.compare_digest(password.encode(), self._password.encode())
        if not (sep and ok_email and ok_password):
            raise AuthError("Invalid e-mail or password")

    def issue(self, lifetime: int | None = None) -> str:
        """A new token valid for ``lifetime`` seconds (default 7 days)."""
        now = time.time()
        lifetime = lifetime or DEFAULT_TOKEN_LIFETIME
        jti = uuid.uuid4().hex
        claims = {"sub": self.email, "iat": int(now), "exp": int(now) + lifetime, "jti": jti}
        self._issued.add(jti)
        self._expires_at[jti] = now + lifetime
        token = jwt.encode(claims, self._secret, algorithm="HS256")
        self.tokens_issued.append(token)
        return token

    # ------------------------------------------------------------ checks

    def _decode(self, token: str) -> Claims:
        claims = self._memo.get(token)
        if claims is not None:
            return claims
        try:
            raw = jwt.decode(token, self._secret, algorithms=["HS256"],
                             options={"verify_exp": False,
                                      "require": ["sub", "iat", "exp", "jti"]})
        except jwt.InvalidTokenError as exc:
            raise AuthError("Invalid token") from exc
        if raw.get("sub") != self.email or not isinstance(raw.get("exp"), (int, float)):
            raise AuthError("Invalid token")
        claims = Claims(str(raw["sub"]), str(raw["jti"]), int(raw["iat"]), int(raw["exp"]))
        if len(self._memo) >= _MEMO_LIMIT:
            self._memo.clear()
        self._memo[token] = claims
        return claims

    def verify_header(self, authorization: str | None, *, allow_expired: bool = False) -> Claims:
        """Check ``Authorization: Bearer <jwt>``; return its claims or raise AuthError
        (missing, malformed, bad signature, expired, revoked)."""
        if not authorization:
            raise AuthError("Missing Authorization header")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError("Bearer token required")
        claims = self._decode(token.strip())
        if claims.jti in self._revoked:
            raise AuthError("Token has been invalidated")
        if not allow_expired and time.time() > self._expires_at.get(claims.jti, claims.exp):
            raise AuthError("Token has expired")
        return claims

    def renew(self, authorization: str | None, lifetime: int | None = None) -> str:
        """Endpoint 2: issue a new token and revoke the one presented."""
        claims = self.verify_header(authorization, allow_expired=self.renew_expired)
        self._revoked.add(claims.jti)
        return self.issue(lifetime)

    # ------------------------------------------------------------ revocation

    def use(self, claims: Claims, max_uses: int) -> bool:
        """Count one use of a checked token; past `max_uses` it is revoked and this
        raises AuthError. Returns True when this use was the token's last one."""
        uses = self._uses.get(claims.jti, 0) + 1
        if uses > max_uses:
            self._revoked.add(claims.jti)
            self._uses.pop(claims.jti, None)
            raise AuthError("Token has been invalidated")
        self._uses[claims.jti] = uses
        return uses == max_uses

    def revoke_all(self) -> int:
        """Revoke every token issued so far; returns how many were still valid."""
        fresh = self._issued - self._revoked
        self._revoked |= self._issued
        return len(fresh)
