"""The source's settings: one dlt ``@configspec``, resolved once per run.

Values come the dlt way, under ``sources.company_connections``: ``.dlt/config.toml``,
``.dlt/secrets.toml`` or env vars such as ``SOURCES__COMPANY_CONNECTIONS__BASE_URL``.
Arguments given to :func:`resolve_settings` win over configured values. The resolved
object is passed down typed (client, fetch, staging); nothing below reads config again.

``password`` and ``access_token`` (and ``email``) are secret-typed, so dlt never writes
their values into a pipeline trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, List, Optional

from dlt.common.configuration import configspec, resolve_configuration
from dlt.common.configuration.specs import BaseConfiguration
from dlt.common.typing import TSecretStrValue
from pydantic import Field

from .settings import (
    DEFAULT_BACKOFF_INITIAL,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_DOWNLOAD_BYTES,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_RETRY_AFTER,
    DEFAULT_RELOGIN_BUDGET,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_RESUME_WITHIN,
    DEFAULT_STALL_TIMEOUT,
    DEFAULT_TOKEN_FILE,
)

__all__ = ["LIMITS", "SourceSettings", "resolve_settings", "SECTIONS", "DEFAULT_BATCH_SIZE"]

SECTIONS = ("sources", "company_connections")
#: Rows per table buffered in memory before they are written to the staged Parquet file.
DEFAULT_BATCH_SIZE = 1000


@configspec
class SourceSettings(BaseConfiguration):
    """Every setting of the source, with its one default."""

    base_url: str = None  # required
    email: Optional[TSecretStrValue] = None
    password: Optional[TSecretStrValue] = None
    access_token: Optional[TSecretStrValue] = None
    #: company IDs to read; default every `companyId` of user-info
    namespaces: Optional[List[str]] = None
    #: requests in flight at once over all namespaces of a run
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT
    requests_per_second: Optional[float] = None
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    backoff_initial: float = DEFAULT_BACKOFF_INITIAL
    #: token-only mode: where renewed tokens are saved (None: not saved)
    token_store_path: Optional[str] = DEFAULT_TOKEN_FILE
    ca_bundle: Optional[str] = None
    allow_insecure_http: bool = False
    #: document downloads may go to private and link-local addresses (loopback is
    #: allowed anyway when base_url is on loopback)
    allow_private_downloads: bool = False
    #: rows per table held in memory per namespace before they go to the staged file
    batch_size: int = DEFAULT_BATCH_SIZE
    #: an answer larger than this is refused (a clear error, not exhausted memory)
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    #: a document file larger than this is not downloaded
    max_download_bytes: int = DEFAULT_MAX_DOWNLOAD_BYTES
    #: re-logins allowed in one run when the service keeps revoking tokens
    relogin_budget: int = DEFAULT_RELOGIN_BUDGET
    #: a Retry-After longer than this (seconds) fails the namespace instead of waiting
    max_retry_after: float = DEFAULT_MAX_RETRY_AFTER
    #: a namespace with no completed request for this long (seconds) fails
    stall_timeout: float = DEFAULT_STALL_TIMEOUT
    #: an interrupted sync's manifest younger than this (seconds) is resumed; 0: never
    resume_within: float = DEFAULT_RESUME_WITHIN

    def client(self, budget: Any = None, evidence: Any = None, transport: Any = None) -> Any:
        """A :class:`~.client.ServiceClient` for one run with these settings; `budget`
        (a :class:`~.limits.RequestBudget`) shares the account's requests with other
        processes; `evidence` (an :class:`~.evidence.EvidenceLog`) keeps what the service
        said; `transport` (an ``httpx.AsyncBaseTransport``) answers instead of the
        network (a replay of kept evidence)."""
        from .auth import FileTokenStore
        from .client import ServiceClient

        token_store = None
        if self.access_token and not self.password and self.token_store_path:
            token_store = FileTokenStore(Path(self.token_store_path))
        return ServiceClient(
            self.base_url,
            email=self.email,
            password=self.password,
            access_token=self.access_token,
            token_store=token_store,
            max_concurrency=self.max_concurrency,
            requests_per_second=self.requests_per_second,
            request_timeout=self.request_timeout,
            max_attempts=self.max_attempts,
            backoff_initial=self.backoff_initial,
            ca_bundle=self.ca_bundle,
            allow_insecure_http=self.allow_insecure_http,
            allow_private_downloads=self.allow_private_downloads,
            max_response_bytes=self.max_response_bytes,
            max_download_bytes=self.max_download_bytes,
            relogin_budget=self.relogin_budget,
            max_retry_after=self.max_retry_after,
            budget=budget,
            evidence=evidence,
            transport=transport,
        )


def _number(kind: type, low: float, high: float, *, above: bool = False) -> Any:
    bounds = {"gt" if above else "ge": low, "le": high}
    return Annotated[kind, Field(**bounds, allow_inf_nan=False) if kind is float else Field(**bounds)]


#: The type and bounds of each setting's value (checked at the edge before dlt resolves
#: them: a wrong one is one line naming the key, never a dlt or Python exception).
LIMITS: dict[str, Any] = {
    "base_url": Annotated[str, Field(min_length=1)],
    "namespaces": Optional[List[Annotated[str, Field(min_length=1)]]],
    "max_concurrency": _number(int, 1, 1024),
    "request_timeout": _number(float, 0, 3600, above=True),
    "requests_per_second": Optional[_number(float, 0, 1e6, above=True)],
    "max_attempts": _number(int, 1, 100),
    "backoff_initial": _number(float, 0, 600),
    "token_store_path": Optional[str],
    "ca_bundle": Optional[str],
    "allow_insecure_http": bool,
    "allow_private_downloads": bool,
    "batch_size": _number(int, 1, 10_000_000),
    "max_response_bytes": _number(int, 1, 1 << 40),
    "max_download_bytes": _number(int, 1, 1 << 50),
    "relogin_budget": _number(int, 0, 1000),
    "max_retry_after": _number(float, 0, 86400),
    "stall_timeout": _number(float, 0, 86400, above=True),
    "resume_within": _number(float, 0, 10 * 366 * 86400),
}


def resolve_settings(**overrides: Any) -> SourceSettings:
    """The source's settings: `overrides` (those not None), else dlt config, else defaults.

    ``token_store_path=None`` given explicitly means "do not save renewed tokens".

    Raises dlt's ``ConfigFieldMissingException`` when `base_url` is set nowhere.
    """
    given = {key: value for key, value in overrides.items() if value is not None}
    if "token_store_path" in overrides and overrides["token_store_path"] is None:
        given["token_store_path"] = ""  # explicitly no token store
    unknown = sorted(set(given) - set(SourceSettings.__dataclass_fields__))  # type: ignore[attr-defined]
    if unknown:
        raise TypeError(f"unknown setting(s) of source company_connections: {', '.join(unknown)}")
    return resolve_configuration(SourceSettings(), sections=SECTIONS, explicit_value=given)
