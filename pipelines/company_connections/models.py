"""Typed views of the service's response bodies (pydantic v2).

Every model keeps unknown properties (``extra="allow"``), accepts both the
service's camelCase names and the Python names, turns numbers into strings where a
string is expected, and treats a missing or null optional key as its default (an
empty list or object where the spec shows a list or object). Only identifiers are
required. Bodies that fail validation are treated by the client as malformed
responses and retried.

`Questionnaire.raw_forms` and `Document.raw` hold the data exactly as received
(JSON-able Python objects), so nothing the models do not know about is lost.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Annotated, Any

import orjson
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, model_validator

from .settings import PAGE_ITEM_KEYS, PAGE_NEXT_KEYS, TOKEN_KEYS

__all__ = [
    "Company",
    "ConnectionDetail",
    "ConnectionEntry",
    "Document",
    "DocumentUrl",
    "Form",
    "FormField",
    "Option",
    "Questionnaire",
    "ReadingRights",
    "RightsScope",
    "Role",
    "RoleScope",
    "UserInfo",
    "adapter",
    "split_page",
    "token_from_body",
]


def _none_as_list(value: Any) -> Any:
    return [] if value is None else value


def _none_as_dict(value: Any) -> Any:
    return {} if value is None else value


def _as_answer(value: Any) -> Any:
    """Keep an answer object as is; wrap a bare scalar or list as ``{"value": ...}``."""
    if value is None or isinstance(value, dict):
        return value
    return {"value": value}


StrList = Annotated[list[str], BeforeValidator(_none_as_list)]


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="allow",
        populate_by_name=True,
        coerce_numbers_to_str=True,
    )


class RoleScope(_Model):
    """Role names and company type ids held inside or towards other companies."""

    names: StrList = []
    company_type_ids: StrList = Field(default=[], alias="companyTypeIds")


class Role(_Model):
    """One company the user belongs to, with the user's roles there."""

    company_id: str = Field(alias="companyId")
    internal: Annotated[RoleScope, BeforeValidator(_none_as_dict)] = Field(
        default_factory=RoleScope
    )
    external: Annotated[RoleScope, BeforeValidator(_none_as_dict)] = Field(
        default_factory=RoleScope
    )


class UserInfo(_Model):
    """Response of endpoint 3; `roles[].company_id` are the usable namespaces."""

    roles: Annotated[list[Role], BeforeValidator(_none_as_list)] = []

    @property
    def company_ids(self) -> list[str]:
        """The distinct company ids of `roles`, in order of first appearance."""
        return list(dict.fromkeys(role.company_id for role in self.roles))


class Company(_Model):
    """Response of endpoint 4."""

    id: str
    name: str | None = None
    country: str | None = None
    city: str | None = None
    lei: str | None = None
    cin: str | None = None


class ConnectionEntry(_Model):
    """One element of the connection list (endpoint 5)."""

    id: str
    name: str | None = None


class RightsScope(_Model):
    """Company type ids covered by reading rights in one direction."""

    company_type_ids: StrList = Field(default=[], alias="companyTypeIds")


class ReadingRights(_Model):
    """Reading rights given to and received from a connection."""

    given: Annotated[RightsScope, BeforeValidator(_none_as_dict)] = Field(
        default_factory=RightsScope
    )
    received: Annotated[RightsScope, BeforeValidator(_none_as_dict)] = Field(
        default_factory=RightsScope
    )


class ConnectionDetail(_Model):
    """Response of endpoint 6."""

    id: str
    name: str | None = None
    country: str | None = None
    reading_rights: Annotated[ReadingRights, BeforeValidator(_none_as_dict)] = Field(
        default_factory=ReadingRights, alias="readingRights"
    )


class Option(_Model):
    """A choice of a Dropdown or Checkbox field, or a selected option in an answer."""

    id: str | None = None
    value: str | None = None


class FormField(_Model):
    """One field of a form. `type` is any string (unknown types pass through);
    `information` is the answer, present only where one exists (endpoint 7)."""

    id: str
    type: str | None = None
    label: str | None = None
    options: list[Option] | None = None
    information: Annotated[dict[str, Any] | None, BeforeValidator(_as_answer)] = None


class Form(_Model):
    """One form of a questionnaire: an ordered list of fields."""

    id: str
    label: str | None = None
    fields: Annotated[list[FormField], BeforeValidator(_none_as_list)] = []


class Questionnaire(_Model):
    """The ``questionnaires.forms`` of endpoints 7 and 8.

    `raw_forms` is the list of forms exactly as received, unknown keys and field
    types included: the sync reads only this, so building a questionnaire from a
    body checks only the shape (a list of forms). `forms` is the typed view,
    validated on first access (a malformed form raises ``ValidationError`` then).
    Build it from a response body with `Questionnaire.from_body`.
    """

    raw_forms: list[Any] = []
    #: the body as received (its keys are recorded in ``raw.service_keys``)
    raw_body: dict[str, Any] = {}

    @cached_property
    def forms(self) -> list[Form]:
        """The typed forms, validated from `raw_forms` on first access."""
        return _FORMS.validate_python(self.raw_forms)

    @cached_property
    def raw_json(self) -> bytes:
        """`raw_forms` as JSON, serialised once for every use (the staged row)."""
        return orjson.dumps(self.raw_forms)

    @classmethod
    def from_body(cls, body: Any) -> Questionnaire:
        """Take a body shaped ``{questionnaires: {forms: [...]}}``.

        Also accepts ``{forms: [...]}``; a null or missing ``forms`` inside
        ``questionnaires`` is an empty questionnaire. Raises ``ValueError`` for any
        other shape (``TypeError`` when a part has the wrong type).
        """
        if not isinstance(body, dict):
            raise TypeError("questionnaire body is not an object")
        if "questionnaires" in body:
            container = body["questionnaires"]
            if container is None:
                container = {}
        elif "forms" in body:
            container = body
        else:
            raise ValueError("questionnaire body has no 'questionnaires' key")
        if not isinstance(container, dict):
            raise TypeError("'questionnaires' is not an object")
        forms = container.get("forms")
        forms = [] if forms is None else forms
        if not isinstance(forms, list):
            raise TypeError("'questionnaires.forms' is not a list")
        if not all(type(form) is dict for form in forms):
            raise TypeError("a form of 'questionnaires.forms' is not an object")
        return cls.model_construct(raw_forms=forms, raw_body=body)


class Document(_Model):
    """One document of endpoint 10; dates are kept as the service's strings.

    `raw` is the document object exactly as received.
    """

    id: str
    name: str | None = None
    category: str | None = None
    type: str | None = None
    issue_date: str | None = Field(default=None, alias="issueDate")
    expiration_date: str | None = Field(default=None, alias="expirationDate")
    raw: dict[str, Any] = {}

    @cached_property
    def raw_json(self) -> bytes:
        """`raw` as JSON, serialised once for every use (the staged row)."""
        return orjson.dumps(self.raw)

    @model_validator(mode="before")
    @classmethod
    def _keep_raw(cls, data: Any) -> Any:
        if isinstance(data, dict) and "id" in data:
            return {**data, "raw": dict(data)}
        return data


class DocumentUrl(_Model):
    """Response of endpoint 11: a temporary download URL (treat it as a secret)."""

    url: str

    def __repr__(self) -> str:
        return f"DocumentUrl(url={self.url.split('?', 1)[0]!r}...)"

    __str__ = __repr__


_TOKEN_TEXT = re.compile(r"^[A-Za-z0-9._~+/=-]+$")


def token_from_body(body: Any) -> str:
    """The token of a login or renewal body: ``{token}`` (or ``accessToken``,
    ``access_token``, ``jwt``), a JSON string, or plain text. Raises ``ValueError``."""
    if isinstance(body, dict):
        body = next((body[k] for k in TOKEN_KEYS if isinstance(body.get(k), str)), None)
    if isinstance(body, str) and _TOKEN_TEXT.match(body.strip()):
        return body.strip()
    raise ValueError("no token found in the response body")


def split_page(body: Any) -> tuple[list[Any], str | None]:
    """Split a list-endpoint body into its raw items and the next-page link in it.

    A bare array has no link in its body (the client also reads a ``Link`` header).
    An object holds its items under ``items``, ``data`` or ``results`` and its link
    under ``next``, ``nextPage`` or ``links.next`` (a URL, or ``{href}``/``{url}``);
    a null or empty link means the last page. Raises ``ValueError``/``TypeError``
    for any other shape.
    """
    if isinstance(body, list):
        return body, None
    if not isinstance(body, dict):
        raise TypeError("expected a JSON array")
    key = next((k for k in PAGE_ITEM_KEYS if isinstance(body.get(k), list)), None)
    if key is None:
        raise ValueError("expected a JSON array or an object with items/data/results")
    links = body.get("links")
    candidates = [body.get(k) for k in PAGE_NEXT_KEYS]
    candidates.append(links.get("next") if isinstance(links, dict) else None)
    for candidate in candidates:
        if isinstance(candidate, dict):
            candidate = candidate.get("href") or candidate.get("url")
        if candidate is None or candidate == "":
            continue
        if not isinstance(candidate, str):
            raise TypeError("a next-page link that is not a URL cannot be followed")
        return body[key], candidate
    return body[key], None


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def adapter(tp: Any) -> TypeAdapter[Any]:
    """Return a cached `TypeAdapter` for `tp` (for example ``list[Document]``)."""
    found = _ADAPTERS.get(tp)
    if found is None:
        found = _ADAPTERS[tp] = TypeAdapter(tp)
    return found


_FORMS: TypeAdapter[list[Form]] = TypeAdapter(Annotated[list[Form], BeforeValidator(_none_as_list)])
