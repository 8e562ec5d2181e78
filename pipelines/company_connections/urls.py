"""URLs of the client: the settings checked, paths built and compared by origin.

* `validate_base_url`: an absolute http(s) URL without credentials, query or
  fragment; plain http only to loopback unless `allow_insecure_http`. The URL is
  never echoed in errors (it might carry credentials).
* `tls_verify`: what the transport verifies against (`ca_bundle` or the default).
* `checked_download_url`: a signed document URL, held to the same http(s) rules.
* `unsigned_url_answer`: endpoint 11's answer as it is kept as evidence, without the
  signature (query and fragment) of its URL, which works as a password until it expires.
* `origin`, `path_of`: what pagination links and downloads are compared by, and the
  path errors name; `segment`, `header_id`: identifiers put into paths (quoted) and
  into the ``x-namespace`` header (refused if they could split a header).
"""

from __future__ import annotations

import ipaddress
import ssl
from urllib.parse import quote

import httpx
import orjson

from .errors import ConfigurationError, ResponseFormatError

__all__ = ["checked_download_url", "header_id", "is_loopback", "origin", "path_of", "segment",
           "tls_verify", "unsigned_url_answer", "validate_base_url"]


def validate_base_url(base_url: str, allow_insecure_http: bool) -> str:
    """Return `base_url` without a trailing slash, or raise `ConfigurationError`.

    The URL itself is never echoed: it might carry credentials.
    """
    try:
        url = httpx.URL(base_url.strip())
    except (httpx.InvalidURL, TypeError):
        raise ConfigurationError("base_url is not a valid URL") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigurationError("base_url must be an absolute http(s) URL")
    if url.userinfo:
        raise ConfigurationError("base_url must not contain credentials; "
                                 "set email and password (or access_token) instead")
    if url.query or url.fragment:
        raise ConfigurationError("base_url must not contain a query string or fragment")
    if url.scheme == "http" and not allow_insecure_http and not is_loopback(url.host):
        raise ConfigurationError(f"refusing plain http to non-loopback host {url.host!r}: "
                                 "use https, or set allow_insecure_http = true under "
                                 "[sources.company_connections] in .dlt/config.toml (env "
                                 "SOURCES__COMPANY_CONNECTIONS__ALLOW_INSECURE_HTTP=true)")
    return str(url.copy_with(path=url.path.rstrip("/") or "/")).rstrip("/")


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def tls_verify(ca_bundle: str | None, verify_tls: bool) -> ssl.SSLContext | bool:
    if ca_bundle is not None:
        if not verify_tls:
            raise ConfigurationError("ca_bundle and verify_tls=False contradict each other")
        try:
            return ssl.create_default_context(cafile=ca_bundle)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(f"cannot load ca_bundle {ca_bundle!r}: {exc}") from None
    return verify_tls


def checked_download_url(url: str, allow_insecure_http: bool) -> httpx.URL:
    try:
        target = httpx.URL(url)
    except (httpx.InvalidURL, TypeError):
        target = None
    if target is None or target.scheme not in ("http", "https") or not target.host:
        raise ResponseFormatError("the document URL is not an absolute http(s) URL",
                                  method="GET", path="<document url>")
    if target.scheme == "http" and not allow_insecure_http and not is_loopback(target.host):
        raise ResponseFormatError("refusing to download over plain http from a non-loopback host",
                                  method="GET", path=path_of(target))
    return target


def origin(url: httpx.URL) -> tuple[str, str, int | None]:
    default = {"http": 80, "https": 443}.get(url.scheme)
    return url.scheme, url.host.lower(), url.port or default


def path_of(url: httpx.URL) -> str:
    return url.raw_path.split(b"?", 1)[0].decode("ascii", "replace")


def segment(value: str) -> str:
    """URL-quote one path identifier (every reserved character, including ``/``)."""
    if not isinstance(value, str) or not value:
        raise ValueError("an identifier must be a non-empty string")
    return quote(value, safe="")


def header_id(value: str | None) -> str:
    if not isinstance(value, str) or not value or any(ch in value for ch in "\r\n\0"):
        raise ValueError("a namespace must be a non-empty company id")
    return value


def unsigned_url_answer(body: bytes) -> bytes:
    """Endpoint 11's answer without its URL's query and fragment (the signature of a
    signed URL, a credential until it expires): what the evidence store keeps of it.
    Where the document came from (scheme, host, path) stays; any other property too."""
    try:
        answer = orjson.loads(body)
        url = httpx.URL(answer["url"])
    except (orjson.JSONDecodeError, KeyError, TypeError, httpx.InvalidURL):
        return b'{"url": null}'
    answer["url"] = str(url.copy_with(query=None, fragment=None))
    return orjson.dumps(answer)
