"""Changes to the sandbox's world: what a counterparty, or the service, does between syncs.

The admin routes (:mod:`sandbox.admin`), the change generator (:mod:`sandbox.changes`),
the hostile world (:mod:`sandbox.hostile`) and the tests change a
:class:`~sandbox.world.World` through these functions alone:

- answers: :func:`set_answer`
- documents: :func:`update_document`, :func:`add_document`, :func:`delete_document`
- namespaces and connections: :func:`revoke_namespace`, :func:`empty_namespace`,
  :func:`connect`, :func:`remove_connection`
- templates: :func:`add_template_field`, :func:`remove_template_field`
- keys the service starts or stops sending: :func:`send_key`

Each checks its arguments first (an unknown id: KeyError, which the admin routes answer
404; a malformed value: ValueError, 400), then, holding the world's lock, changes the
world's state, tells the world which of its memos the change outdated, and bumps
:attr:`World.generation <sandbox.world.World.generation>` once, which the HTTP app
watches to drop its cached response bytes. A call that fails, or changes nothing,
leaves the generation as it was.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, time, timedelta
from typing import Any

from sandbox import generate as gen
from sandbox import vocab
from sandbox.world import UNANSWERED, Connection, Namespace, World

__all__ = ["EXTRA_KEY_ENDPOINTS", "add_document", "add_template_field", "connect", "delete_document",
           "empty_namespace", "remove_connection", "remove_template_field", "revoke_namespace",
           "send_key", "set_answer", "update_document"]

#: endpoints that can send extra keys (:func:`send_key`)
EXTRA_KEY_ENDPOINTS: tuple[str, ...] = ("company", "connections", "connection", "questionnaire", "template",
                                        "documents")
#: characters a document id added through :func:`add_document` may use (a URL path segment)
_DOCUMENT_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")


# ------------------------------------------------------------ answers

def set_answer(world: World, company_id: str, type_id: str, field_id: str,
               information: dict[str, Any] | None) -> None:
    """Set (or with ``None`` remove) the answer of one field of a company's
    questionnaire; every namespace that reads it sees the change."""
    if company_id not in world.companies:
        raise KeyError(f"unknown company {company_id}")
    spec = world.field_spec(field_id)
    if spec is None or world.field_type_id(field_id) != type_id:
        raise KeyError(f"field {field_id} is not part of company type {type_id}")
    if spec.type == gen.LABEL and information is not None:
        raise ValueError("Label fields carry no answer")
    if information is not None and not isinstance(information, dict):
        raise ValueError("information must be an object or null")
    with world.lock:
        world.overrides.setdefault((company_id, type_id), {})[field_id] = (
            UNANSWERED if information is None else information)
        world.forget_answers(company_id, type_id)
        world.generation += 1


# ------------------------------------------------------------ documents

def update_document(world: World, document_id: str, *, set_fields: dict[str, Any] | None = None,
                    unset: list[str] | None = None) -> dict[str, Any]:
    """Change a document: ``set_fields`` assigns properties (``None`` makes
    them null), ``unset`` removes keys. ``id`` cannot change."""
    found = world.document(document_id)
    if found is None:
        raise KeyError(f"unknown document {document_id}")
    doc = found[2]
    with world.lock:
        for key, value in (set_fields or {}).items():
            if key != "id":
                doc[key] = value
        for key in unset or []:
            if key != "id":
                doc.pop(key, None)
        world.generation += 1
    return doc


def add_document(world: World, company_id: str, type_id: str, document: dict[str, Any]) -> dict[str, Any]:
    """Add a document at the end of (company, type)'s list (endpoint 10) and return it.

    ``document`` holds the document's properties. A missing ``id`` is generated
    (UUID-shaped, unique); the properties a generated document carries get defaults
    when missing: ``name``, ``category`` and ``type`` of a document kind of the
    vocabulary, ``issueDate`` today 09:00, ``expirationDate`` a year later and, in a
    ``drift`` world, ``mimeType`` (from the name's extension) and ``sizeBytes`` (the
    size of the file endpoint 11 serves for it). Unknown company or type: KeyError;
    an id in use or not a plain URL path segment, or a name that is not a string:
    ValueError.
    """
    if company_id not in world.companies:
        raise KeyError(f"unknown company {company_id}")
    if type_id not in world.templates:
        raise KeyError(f"unknown company type {type_id}")
    if not isinstance(document, dict):
        raise ValueError("document must be an object")
    given_id = document.get("id")
    if given_id is not None and (not isinstance(given_id, str) or not given_id
                                 or not set(given_id) <= _DOCUMENT_ID_CHARS):
        raise ValueError("document id must be a non-empty string of letters, digits and -_.~")
    if "name" in document and not isinstance(document["name"], str):
        raise ValueError("document name must be a string")
    with world.lock:
        docs = world.documents(company_id, type_id)
        if given_id is not None:
            if world.document(given_id) is not None:
                raise ValueError(f"document {given_id} exists already")
            doc_id = given_id
        else:
            attempt = 0
            while True:
                doc_id = gen.uuid_like(world.seed, "added-document", company_id, type_id,
                                       world.generation, attempt)
                if world.document(doc_id) is None:
                    break
                attempt += 1
        kinds = vocab.DOCUMENT_KINDS
        category, doc_type, stem, ext = kinds[gen.h64(world.seed, "added-document", doc_id) % len(kinds)]
        issued = datetime.combine(world.today, time(9))
        doc: dict[str, Any] = {
            "id": doc_id,
            "name": f"{stem}_{world.today.year}.{ext}",
            "category": category,
            "type": doc_type,
            "issueDate": gen.timestamp(issued),
            "expirationDate": gen.timestamp(issued + timedelta(days=365)),
            **{k: v for k, v in document.items() if k != "id"},
        }
        if world.drift:
            pdf = str(doc["name"]).endswith(".pdf")
            doc.setdefault("mimeType", "application/pdf" if pdf else "application/octet-stream")
            if "sizeBytes" not in doc:
                doc["sizeBytes"] = _file_size(world, company_id, doc)
        docs.append(doc)
        world.index_document(doc_id, company_id, type_id)
        world.generation += 1
        return doc


def _file_size(world: World, company_id: str, doc: dict[str, Any]) -> int:
    """The size of the file of ``doc`` once it carries that very size as ``sizeBytes``
    (the file embeds every property, so the size is found by iterating)."""
    owner = str(world.companies[company_id]["name"])
    size = 0
    for _ in range(8):
        found = len(gen.render_file({**doc, "sizeBytes": size}, owner))
        if found == size:
            break
        size = found
    return size


def delete_document(world: World, document_id: str) -> None:
    """Remove a document from its company's list."""
    found = world.document(document_id)
    if found is None:
        raise KeyError(f"unknown document {document_id}")
    company_id, type_id, doc = found
    with world.lock:
        world.documents(company_id, type_id).remove(doc)
        world.unindex_document(document_id)
        world.generation += 1


# ------------------------------------------------------------ namespaces and connections

def revoke_namespace(world: World, company_id: str) -> None:
    """The user loses company ``company_id``: it leaves the roles, and
    requests made in its namespace answer 403."""
    if company_id not in world.all_namespaces:
        raise KeyError(f"{company_id} is not one of the user's companies")
    with world.lock:
        world.revoked.add(company_id)
        world.generation += 1


def empty_namespace(world: World, ns_id: str) -> None:
    """The namespace keeps no connections and no company types of its own:
    it still exists, and every list it reads is empty."""
    with world.lock:
        ns = world.all_namespaces[ns_id]
        ns.connections.clear()
        ns.by_id.clear()
        ns.internal_types.clear()
        world.forget_rights(ns_id)
        world.generation += 1


def connect(world: World, ns_id: str, company_id: str, *, received: list[str] | None = None,
            given: list[str] | None = None) -> Connection:
    """Make ``company_id`` a connection of the namespace, or change the rights of a
    connection already there; returns the connection.

    ``received`` are the company types the namespace reads of the company (its
    questionnaires and documents of those types become readable, and their templates
    too), ``given`` the types the company reads of the namespace; duplicates are
    dropped, order is kept. A new connection is listed last (endpoint 5) and served
    by endpoints 4, 6, 7, 10 and 11 like a generated one; a list left out is then
    empty. For a connection already there a list left out is kept (a ghost stays a
    ghost). Lists that are not of known company type ids: ValueError; a namespace
    the user is not in, an unknown company, or the namespace itself: KeyError.
    """
    rights: list[list[str] | None] = []
    for name, types in (("received", received), ("given", given)):
        if types is not None and (not isinstance(types, list) or not all(
                isinstance(t, str) and t in world.templates for t in types)):
            raise ValueError(f"{name} must be a list of known company type ids")
        rights.append(None if types is None else list(dict.fromkeys(types)))
    new_received, new_given = rights
    if not isinstance(company_id, str):
        raise ValueError("company_id must be a string")
    with world.lock:
        ns = _member(world, ns_id)
        if company_id not in world.companies or company_id == ns_id:
            raise KeyError(f"{company_id} is not a company {ns_id} can connect to")
        conn = ns.by_id.get(company_id)
        if conn is None:
            conn = Connection(company_id, new_given or [], new_received or [])
            ns.connections.append(conn)
            ns.by_id[company_id] = conn
        else:
            conn.given = conn.given if new_given is None else new_given
            conn.received = conn.received if new_received is None else new_received
        world.forget_rights(ns_id)
        world.forget_document_index()  # documents of the newly readable pairs
        world.generation += 1
        return conn


def remove_connection(world: World, ns_id: str, company_id: str) -> None:
    """The namespace is no longer connected to ``company_id``: it leaves the
    connections list, and its details and data answer 404 there. Unknown
    namespace or not a connection: KeyError."""
    with world.lock:
        ns = _member(world, ns_id)
        conn = ns.by_id.pop(company_id, None)
        if conn is None:
            raise KeyError(f"{company_id} is not a connection of {ns_id}")
        ns.connections.remove(conn)
        world.forget_rights(ns_id)
        world.generation += 1


def _member(world: World, ns_id: str) -> Namespace:
    """The namespace ``ns_id``; KeyError unless the user currently belongs to it
    (ValueError if it is not a string)."""
    if not isinstance(ns_id, str):
        raise ValueError("namespace must be a company id")
    ns = world.namespace(ns_id)
    if ns is None:
        raise KeyError(f"{ns_id} is not one of the user's companies")
    return ns


# ------------------------------------------------------------ templates

def add_template_field(world: World, type_id: str, spec: dict[str, Any], form_id: str | None = None) -> None:
    """Add a field at the end of a form of the type's template (``form_id``, default
    its first form): the template (endpoint 8) and every questionnaire of the type
    (endpoint 7) show it, unanswered, and the truth counts it.

    ``spec`` is ``{id, type, label?, options?}``: ``label`` defaults to ``""``;
    ``options`` (a list of ``{id, value}``) defaults to ``[]`` for choice types and
    is absent otherwise. An id used by any field of any template, or a malformed
    spec: ValueError; unknown type or form: KeyError.
    """
    if not isinstance(spec, dict):
        raise ValueError("add_field must be an object")
    field_id, ftype, label = spec.get("id"), spec.get("type"), spec.get("label", "")
    if not isinstance(field_id, str) or not field_id or not isinstance(ftype, str) or not ftype:
        raise ValueError("add_field needs a string id and type")
    if not isinstance(label, str):
        raise ValueError("add_field label must be a string")
    options = spec.get("options")
    if options is None and ftype in gen.CHOICE_TYPES:
        options = []
    if options is not None and (not isinstance(options, list) or not all(
            isinstance(o, dict) and isinstance(o.get("id"), str) and isinstance(o.get("value"), str)
            for o in options)):
        raise ValueError("add_field options must be a list of {id, value} strings")
    if form_id is not None and not isinstance(form_id, str):
        raise ValueError("form_id must be a string")
    field: dict[str, Any] = {"id": field_id, "type": ftype, "label": label}
    if options is not None:
        field["options"] = [{"id": o["id"], "value": o["value"]} for o in options]
    field_spec = gen.FieldSpec(field_id, ftype, label,
                               None if options is None else tuple(field["options"]), None)
    with world.lock:
        template = world.templates.get(type_id)
        if template is None:
            raise KeyError(f"unknown company type {type_id}")
        if world.field_type_id(field_id) is not None:
            raise ValueError(f"field {field_id} exists already")
        forms = [dict(form, fields=list(form["fields"])) for form in template.forms]
        index = next((i for i, form in enumerate(forms) if form_id is None or form["id"] == form_id), None)
        if index is None:
            raise KeyError(f"form {form_id} is not in the template of {type_id}")
        forms[index]["fields"].append(field)
        # the spec goes after the form's last field, so `fields` keeps questionnaire order
        before = sum(len(form["fields"]) for form in forms[:index + 1]) - 1
        fields = (*template.fields[:before], field_spec, *template.fields[before:])
        world.templates[type_id] = replace(template, forms=tuple(forms), fields=fields)
        world.added_fields.add(field_id)
        world.forget_template(type_id)
        world.generation += 1


def remove_template_field(world: World, type_id: str, field_id: str) -> None:
    """Remove a field from the type's template (endpoint 8) and every questionnaire
    of the type (endpoint 7); its answers are gone with it (endpoint 9 answers 404,
    the truth no longer counts them) and do not come back if a field of that id is
    added again. Unknown type, or a field not of that type: KeyError."""
    with world.lock:
        template = world.templates.get(type_id)
        if template is None:
            raise KeyError(f"unknown company type {type_id}")
        if world.field_type_id(field_id) != type_id:
            raise KeyError(f"field {field_id} is not part of company type {type_id}")
        forms = tuple(dict(form, fields=[f for f in form["fields"] if f["id"] != field_id])
                      for form in template.forms)
        world.templates[type_id] = replace(template, forms=forms,
                                           fields=tuple(f for f in template.fields if f.id != field_id))
        for key, overrides in world.overrides.items():
            if key[1] == type_id:
                overrides.pop(field_id, None)
        world.forget_template(type_id)
        world.generation += 1


# ------------------------------------------------------------ keys

def send_key(world: World, endpoint: str, key: str, value: Any = None, *,
             remove: bool = False) -> dict[str, dict[str, Any]]:
    """From now on every object of ``endpoint`` carries the top-level ``key`` with
    ``value`` (a key the service starts sending), or, with ``remove``, no longer does
    (removing a key not sent changes nothing). Endpoints: ``company`` (4, the body),
    ``connections`` (5, each entry), ``connection`` (6, the body), ``questionnaire``
    (7) and ``template`` (8, the body's top level), ``documents`` (10, each document).
    An object that carries the key already (natively, or set on it) keeps its own
    value. Unknown endpoint, or a key that is not a non-empty string: ValueError.
    Returns the extra keys per endpoint (:meth:`World.sent_keys
    <sandbox.world.World.sent_keys>`)."""
    if endpoint not in EXTRA_KEY_ENDPOINTS:
        raise ValueError(f"endpoint must be one of {', '.join(EXTRA_KEY_ENDPOINTS)}")
    if not isinstance(key, str) or not key:
        raise ValueError("key must be a non-empty string")
    with world.lock:
        extras = world.extra_keys.setdefault(endpoint, {})
        if remove:
            if key in extras:
                del extras[key]
                world.generation += 1
        else:
            extras[key] = value
            world.generation += 1
        return world.sent_keys()
