"""Object storage (S3 and S3-compatible servers): its credentials, and the two ways the
project talks to it.

A lake's data path and the evidence store may be ``s3://bucket/prefix/`` URLs. Who may
write there comes from the standard variables, each else from ``[warehouse]``::

    AWS_ACCESS_KEY_ID       [warehouse] s3_access_key_id
    AWS_SECRET_ACCESS_KEY   [warehouse] s3_secret_access_key   (in .dlt/secrets.toml)
    AWS_SESSION_TOKEN       [warehouse] s3_session_token       (optional)
    AWS_REGION              [warehouse] s3_region              (AWS_DEFAULT_REGION too)
    AWS_ENDPOINT_URL        [warehouse] s3_endpoint_url        (a non-AWS server)

:class:`ObjectStorage` holds them (the secret never in its ``repr``), and gives:

- :meth:`ObjectStorage.duckdb_secret_sql`: a *temporary* DuckDB secret (kept in memory
  by the connection, never written to disk) that DuckDB's ``httpfs`` reads the lake's
  Parquet files with;
- :meth:`ObjectStorage.client`: a boto3 client for the evidence store's objects.

An endpoint that is not AWS's (``AWS_ENDPOINT_URL=http://127.0.0.1:9000``, MinIO,
SeaweedFS, Ceph, R2) is addressed path-style (``host/bucket/key``); TLS is turned off
only for an ``http://`` endpoint.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from ..config import settings
from ..errors import WarehouseLocationError, redact
from .sql import sql_string

__all__ = [
    "ObjectStorage",
    "S3Url",
    "apart_from_data",
    "is_s3_url",
    "object_storage",
    "probe_writable",
    "working_copy",
]

#: the name of the DuckDB secret the lake's connections make
SECRET_NAME = "diligence_s3"
_S3_URL = re.compile(r"^(s3|s3a|r2)://([^/\s]+)(/.*)?$", re.IGNORECASE)

#: (environment variable(s), [warehouse] key)
_SETTINGS = {
    "key_id": (("AWS_ACCESS_KEY_ID",), "s3_access_key_id"),
    "secret": (("AWS_SECRET_ACCESS_KEY",), "s3_secret_access_key"),
    "session_token": (("AWS_SESSION_TOKEN",), "s3_session_token"),
    "region": (("AWS_REGION", "AWS_DEFAULT_REGION"), "s3_region"),
    "endpoint_url": (("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"), "s3_endpoint_url"),
}
_SECRETS = ("secret", "session_token")


@dataclass(frozen=True)
class S3Url:
    """``s3://bucket/prefix/`` split: the bucket and the key prefix (``""`` or ending in ``/``)."""

    bucket: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> S3Url:
        match = _S3_URL.match(url.strip())
        if not match:
            raise WarehouseLocationError(f"{redact(url)!r} is not an s3://bucket/prefix/ URL")
        prefix = (match.group(3) or "").strip("/")
        return cls(match.group(2), prefix + "/" if prefix else "")

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}"

    def key(self, name: str) -> str:
        return self.prefix + name


def is_s3_url(text: str | os.PathLike[str] | None) -> bool:
    """True for an ``s3://`` (``s3a://``, ``r2://``) URL."""
    return text is not None and bool(_S3_URL.match(str(text).strip()))


@dataclass(frozen=True)
class ObjectStorage:
    """The credentials and endpoint of the object storage (see the module docstring)."""

    key_id: str | None = None
    secret: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    region: str | None = None
    endpoint_url: str | None = None

    def __post_init__(self) -> None:
        if self.endpoint_url:
            parts = urlsplit(self.endpoint_url)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise WarehouseLocationError(
                    f"the object storage endpoint {redact(self.endpoint_url)!r} must be an "
                    "http:// or https:// URL (AWS_ENDPOINT_URL, [warehouse] s3_endpoint_url)"
                )
        if bool(self.key_id) != bool(self.secret):
            given, missing = (
                ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY") if self.key_id
                else ("AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID"))
            raise WarehouseLocationError(
                f"object storage: {given} is set but {missing} is not "
                "(or [warehouse] s3_access_key_id / s3_secret_access_key)")

    @property
    def is_aws(self) -> bool:
        """True unless an endpoint other than AWS's own is given."""
        if not self.endpoint_url:
            return True
        host = urlsplit(self.endpoint_url).hostname or ""
        return host.endswith(".amazonaws.com")

    @property
    def use_ssl(self) -> bool:
        """TLS is off only for an ``http://`` endpoint."""
        return not (self.endpoint_url or "").lower().startswith("http://")

    @property
    def secrets(self) -> tuple[str, ...]:
        """The values that must never be shown (hidden by :func:`pipelines.secrets.redact`)."""
        return tuple(value for name in _SECRETS if (value := getattr(self, name)))

    def addressing(self) -> dict[str, str]:
        """Where and how the secret reaches the server: region, endpoint (host:port),
        path-style off AWS, TLS (DuckDB's secret options, in lowercase)."""
        options: dict[str, str] = {}
        if self.region:
            options["region"] = self.region
        if self.endpoint_url:
            options["endpoint"] = urlsplit(self.endpoint_url).netloc
        if not self.is_aws:
            options["url_style"] = "path"
        options["use_ssl"] = "true" if self.use_ssl else "false"
        return options

    def duckdb_secret_sql(self) -> str:
        """``CREATE OR REPLACE TEMPORARY SECRET``: held by one connection, in memory only."""
        options = ["type s3"]
        if self.key_id:
            options += [f"key_id {sql_string(self.key_id)}", f"secret {sql_string(self.secret or '')}"]
            if self.session_token:
                options.append(f"session_token {sql_string(self.session_token)}")
        else:
            options.append("provider config")
        options += [_option(key, value) for key, value in self.addressing().items()]
        return f"create or replace temporary secret {SECRET_NAME} ({', '.join(options)})"

    def dbt_secret(self) -> tuple[dict[str, Any], dict[str, str]]:
        """(the secret as dbt-duckdb's profile takes it, the environment it reads): the
        profile names the key and secret through ``env_var('DBT_ENV_SECRET_...')``, so
        the file holds neither and dbt scrubs both from its logs."""
        secret: dict[str, Any] = {"type": "s3"}
        environment: dict[str, str] = {}
        if self.key_id:
            environment["DBT_ENV_SECRET_S3_KEY_ID"] = self.key_id
            environment["DBT_ENV_SECRET_S3_SECRET"] = self.secret or ""
            secret["key_id"] = "{{ env_var('DBT_ENV_SECRET_S3_KEY_ID') }}"
            secret["secret"] = "{{ env_var('DBT_ENV_SECRET_S3_SECRET') }}"
            if self.session_token:
                environment["DBT_ENV_SECRET_S3_SESSION_TOKEN"] = self.session_token
                secret["session_token"] = "{{ env_var('DBT_ENV_SECRET_S3_SESSION_TOKEN') }}"
        return secret | self.addressing(), environment

    def analyst_secret_sql(self) -> str:
        """The ``CREATE SECRET`` an analyst runs in the ``duckdb`` shell: their own keys
        from their environment (``getenv``), this endpoint and addressing."""
        options = ["TYPE s3", "KEY_ID getenv('AWS_ACCESS_KEY_ID')",
                   "SECRET getenv('AWS_SECRET_ACCESS_KEY')"]
        options += [_option(key.upper(), value) for key, value in self.addressing().items()]
        return f"CREATE SECRET ({', '.join(options)});"

    def client(self) -> Any:
        """A boto3 S3 client with these credentials, endpoint and addressing."""
        import boto3  # start-up (boto3 0.2 s of imports): only a store in a bucket needs it
        from botocore.config import Config

        return boto3.session.Session().client(
            "s3",
            aws_access_key_id=self.key_id,
            aws_secret_access_key=self.secret,
            aws_session_token=self.session_token,
            region_name=self.region or "us-east-1",
            endpoint_url=self.endpoint_url,
            config=Config(
                s3={"addressing_style": "virtual" if self.is_aws else "path"},
                retries={"max_attempts": 3, "mode": "standard"},
                connect_timeout=5,
                read_timeout=30,
                max_pool_connections=32,
            ),
        )


def _option(key: str, value: str) -> str:
    """One option of ``CREATE SECRET``: a boolean bare, anything else a string literal."""
    return f"{key} {value if value in ('true', 'false') else sql_string(value)}"


def object_storage() -> ObjectStorage:
    """The object storage settings: each standard ``AWS_*`` variable, else its
    ``[warehouse]`` key (see the module docstring)."""
    values: dict[str, str | None] = {}
    configured = settings().warehouse
    for name, (variables, key) in _SETTINGS.items():
        value: Any = next((os.environ[v] for v in variables if os.environ.get(v)), None)
        if value is None:
            value = getattr(configured, key)
            value = value.get_secret_value() if isinstance(value, SecretStr) else value
        values[name] = str(value) if value else None
    return ObjectStorage(**values)


def working_copy(url: str) -> Path:
    """This machine's working copy of the evidence store at `url`: a folder of the user's
    cache (``$XDG_CACHE_HOME/diligence/evidence-<hash of the URL>``)."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(url.encode()).hexdigest()[:12]
    return cache / "diligence" / f"evidence-{digest}"


def apart_from_data(evidence: str, data_path: str | None) -> None:
    """Refuse an evidence store inside a lake's data path, or a data path inside it:
    DuckLake's cleanup deletes the files it does not know there."""
    if not data_path or not is_s3_url(data_path):
        return
    store, data = S3Url.parse(evidence), S3Url.parse(data_path)
    if store.bucket == data.bucket and (
            store.prefix.startswith(data.prefix) or data.prefix.startswith(store.prefix)):
        raise WarehouseLocationError(
            f"the evidence store {store} must not share a prefix with the lake's data path "
            f"{data} (DuckLake deletes files it does not know there): give each its own")


def probe_writable(url: str, storage: ObjectStorage, what: str) -> None:
    """Prove that `url` (``s3://bucket/prefix/``) takes an object and gives it back:
    write, read and delete a probe. Raises :class:`WarehouseLocationError` (one line)."""
    from botocore.exceptions import BotoCoreError, ClientError

    place = S3Url.parse(url)
    key = place.key(f".diligence-write-probe-{uuid.uuid4().hex}")
    client = storage.client()
    try:
        client.put_object(Bucket=place.bucket, Key=key, Body=b"")
        client.delete_object(Bucket=place.bucket, Key=key)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        reason = f"{error.get('Code', 'error')}: {error.get('Message', '')}".rstrip(": ")
        raise WarehouseLocationError(
            f"{what} {place} cannot be written: {redact(reason, storage.secrets)}") from None
    except BotoCoreError as exc:
        raise WarehouseLocationError(
            f"{what} {place} cannot be reached: {redact(str(exc), storage.secrets)}") from None
