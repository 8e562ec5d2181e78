"""The flow's access to the service: credentials and the user's namespaces.

Credentials are never flow parameters. They resolve the dlt way (``.dlt/secrets.toml``
or ``SOURCES__COMPANY_CONNECTIONS__PASSWORD`` / ``__ACCESS_TOKEN``); when neither a
password nor an access token is configured there, the password is read from the
Prefect Secret block ``company-connections-password``, if it exists. Call these
functions inside the task that talks to the service, so that the value never becomes
a task input, a task result or a log line. Plain settings (the configured namespaces)
come from :mod:`diligence.config`, like everywhere else.
"""

from __future__ import annotations

from typing import Any

from prefect.blocks.system import Secret

from diligence.config import configured_namespaces
from diligence.steps import source_settings
from pipelines.company_connections import SourceSettings, run_coroutine
from pipelines.company_connections.credentials import CREDENTIALS, configured_secret
from pipelines.secrets import redact

__all__ = [
    "PASSWORD_BLOCK",
    "configured_namespaces",
    "credential_options",
    "flow_settings",
    "mask",
    "password_from_block",
    "secret_values",
    "user_companies",
]

PASSWORD_BLOCK = "company-connections-password"


def password_from_block(name: str = PASSWORD_BLOCK) -> str | None:
    """The value of the Secret block `name`, or None when there is no such block."""
    try:
        block = Secret.load(name)
    except ValueError:  # "Unable to find block document named ..."
        return None
    value = block.get()
    return str(value) if value else None


def credential_options() -> dict[str, Any]:
    """Source options that complete dlt's configuration: the block's password, if needed."""
    if any(configured_secret(key) for key in CREDENTIALS):
        return {}
    password = password_from_block()
    return {"password": password} if password else {}


def secret_values() -> tuple[str, ...]:
    """Every secret value in use, so that text can be masked before it is published."""
    values = [configured_secret(key) for key in CREDENTIALS]
    values.append(credential_options().get("password"))
    return tuple(value for value in values if value)


def mask(text: str) -> str:
    """`text` with secret values, bearer/basic credentials and JWTs replaced by ``***``."""
    return redact(text, secret_values())


def flow_settings(base_url: str | None, namespaces: list[str] | None = None) -> SourceSettings:
    """The source's settings for a flow run: the parameters, then dlt config, with the
    password from the Secret block when config has no credentials. Resolved inside the
    task that uses them, so no secret ever becomes a flow or task parameter."""
    return source_settings(base_url=base_url, namespaces=namespaces or None, **credential_options())


def user_companies(settings: SourceSettings) -> list[str]:
    """The `companyId` of every role in user-info: the namespaces the user can sync.

    Raises the client's `AuthenticationError` on bad credentials.
    """
    client = settings.client()

    async def read() -> list[str]:
        async with client:
            info = await client.user_info()
        return info.company_ids

    return run_coroutine(read())
