"""The key paths the service sends, per endpoint, and which of them the warehouse models.

A key path names a property wherever it occurs: ``registeredAt`` on a company,
``readingRights.received.companyTypeIds`` on a connection's detail,
``questionnaires.forms[].fields[].information.value`` in a questionnaire (``[]`` stands
for every element of a list). For the list endpoints (connections, documents) the
paths are those of one item.

A path is *modelled* when the client's models (:mod:`.models`) declare it, so that a
column or a staging model reads it; everything else the service sends is kept only as
JSON (or not at all). The fetch records the paths of every response it reads
(:class:`KeysSeen`) into ``raw.service_keys``, versioned per namespace like the other
history tables: a path the service starts or stops sending is one new or ended version,
whatever the number of items that carry it.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import BaseModel

from .models import Company, ConnectionDetail, ConnectionEntry, Document, Form
from .rows import content_hash

__all__ = ["ENDPOINTS", "MODELLED", "KeysSeen", "key_paths", "model_paths"]


def _nested(annotation: Any) -> Iterator[tuple[str, type[BaseModel]]]:
    """The models inside a field's annotation, each with ``"[]"`` when in a list."""
    origin = typing.get_origin(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield "", annotation
    elif origin in (list, tuple, set):
        for arg in typing.get_args(annotation):
            for suffix, model in _nested(arg):
                yield "[]" + suffix, model
    elif origin in (typing.Union, types.UnionType, typing.Annotated):
        for arg in typing.get_args(annotation):
            yield from _nested(arg)


def model_paths(model: type[BaseModel], prefix: str = "") -> frozenset[str]:
    """Every key path `model` declares (by the service's names, its aliases)."""
    paths: set[str] = set()
    for name, info in model.model_fields.items():
        path = prefix + (info.alias or name)
        paths.add(path)
        for suffix, inner in _nested(info.annotation):
            paths |= model_paths(inner, f"{path}{suffix}.")
    return frozenset(paths)


#: what staging reads of an answer (``information``): sql/models/marts/answer_history.sql
_ANSWER = ("information.value", "information.options", "information.options[].id",
           "information.options[].value", "information.values")
_FORMS = "questionnaires.forms[]."
_QUESTIONNAIRE = frozenset({
    "questionnaires", "questionnaires.forms",
    *(_FORMS + path for path in model_paths(Form)),
    *(_FORMS + "fields[]." + path for path in _ANSWER),
})

#: endpoint (as in ``sync_issues.endpoint``) -> the key paths the warehouse models
MODELLED: dict[str, frozenset[str]] = {
    "company": model_paths(Company),
    "connections": model_paths(ConnectionEntry),
    "connection": model_paths(ConnectionDetail),
    "questionnaire": _QUESTIONNAIRE,
    "template": _QUESTIONNAIRE,
    "documents": model_paths(Document) - {"raw"},
}
ENDPOINTS: tuple[str, ...] = tuple(MODELLED)


def key_paths(value: Any, prefix: str = "") -> set[str]:
    """Every key path of a JSON value (objects, lists, scalars) or a parsed model (its
    properties as received: declared ones that were sent, and unknown ones)."""
    paths: set[str] = set()
    _walk(value, prefix, paths)
    return paths


def _walk(value: Any, prefix: str, paths: set[str]) -> None:
    if isinstance(value, BaseModel):
        fields = type(value).model_fields
        items: Iterable[tuple[str, Any]] = [  # (the fields set include the unknown keys)
            (fields[name].alias or name, getattr(value, name)) for name in value.model_fields_set
            if name in fields
        ]
        items = [*items, *(value.model_extra or {}).items()]
    elif isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        for item in value:
            _walk(item, prefix + "[]" if prefix else "[]", paths)
        return
    else:
        return
    base = prefix + "." if prefix else ""
    for key, item in items:
        path = base + str(key)
        paths.add(path)
        _walk(item, path, paths)


class KeysSeen:
    """The key paths one namespace's fetch saw, per endpoint, each with a response that
    had it: the least sha256 of those that had it (None when no evidence is kept). Not
    the first to arrive: concurrent responses arrive in any order, and a replay of the
    same responses must name the same one."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], str | None] = {}
        self._read: set[tuple[str, str | None]] = set()

    def see(self, endpoint: str, value: Any, response: str | None) -> None:
        """Record the paths of `value`, a response's body (or its parsed model) of
        `endpoint`, or one item of a list endpoint. A response already seen (same
        sha256) is not walked again."""
        if response is not None:
            if (endpoint, response) in self._read:
                return
            self._read.add((endpoint, response))
        for path in key_paths(value):
            self._keep((endpoint, path), response)

    def see_items(self, endpoint: str, items: Iterable[Any], responses: Iterable[str | None]) -> None:
        """Record the paths of each item of a list endpoint, with the response of each."""
        for item, response in zip(items, responses, strict=True):
            for path in key_paths(item):
                self._keep((endpoint, path), response)

    def _keep(self, key: tuple[str, str], response: str | None) -> None:
        kept = self._seen.get(key, response)
        self._seen[key] = kept if kept is None or response is None else min(kept, response)

    def rows(self, namespace: str) -> list[dict[str, Any]]:
        """The ``service_keys`` rows (``synced_at`` aside), sorted by endpoint and path."""
        rows = []
        for (endpoint, path), response in sorted(self._seen.items()):
            modelled = path in MODELLED.get(endpoint, ())
            rows.append({
                "namespace_company_id": namespace,
                "endpoint": endpoint,
                "key_path": path,
                "is_modelled": modelled,
                "content_hash": content_hash(namespace, endpoint, path, str(modelled)),
                "response_sha256": response,
            })
        return rows
