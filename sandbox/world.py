"""The sandbox's world as the routes read it: who is connected to whom, with which
rights, their answers and documents, and the truth.

:func:`sandbox.data.build_world` lays out the structure (companies, namespaces,
connections, reading rights); :class:`World` builds the templates and serves the rest.
Questionnaire answers and documents are generated on demand from a hash of (seed,
company, company type) by :mod:`sandbox.generate` and memoised, so a company's answers
are its own and identical whichever namespace reads them.

The world is mutable through a few methods (:meth:`World.set_answer`,
:meth:`World.update_document`, :meth:`World.add_document`,
:meth:`World.delete_document`, :meth:`World.revoke_namespace`,
:meth:`World.connect`, :meth:`World.remove_connection`,
:meth:`World.add_template_field`, :meth:`World.remove_template_field`,
:meth:`World.send_key`); each bumps :attr:`World.generation`, which the
HTTP app watches to drop its cached response bytes, and takes the world's lock.
"""

from __future__ import annotations

import enum
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time, timedelta
from typing import Any

from sandbox import generate as gen
from sandbox import vocab
from sandbox.truth import QuestionnaireStats, compute_truth

__all__ = ["Access", "Connection", "Namespace", "World"]


class Access(enum.Enum):
    """Outcome of a read-rights check for (namespace, company, company type)."""

    OK = "ok"
    FORBIDDEN = "forbidden"  # company is itself or a connection, type not readable: 403
    NOT_FOUND = "not_found"  # company is neither itself nor an established connection: 404


@dataclass
class Connection:
    """A namespace's connection. ``ghost`` connections are listed by endpoint 5
    (and their company details, endpoint 4, answer) but their connection detail
    (endpoint 6) answers 404 and their questionnaires and documents are not
    readable (404)."""

    company_id: str
    given: list[str]
    received: list[str]
    ghost: bool = False


@dataclass
class Namespace:
    """A company the user belongs to, with its role entry and its connections."""

    company_id: str
    internal_names: list[str]
    internal_types: list[str]
    external_names: list[str]
    external_types: list[str]
    connections: list[Connection]
    by_id: dict[str, Connection] = field(default_factory=dict)

    def role(self) -> dict[str, Any]:
        """The namespace's entry in the user-info ``roles`` array."""
        return {
            "companyId": self.company_id,
            "internal": {"names": list(self.internal_names),
                         "companyTypeIds": list(self.internal_types)},
            "external": {"names": list(self.external_names),
                         "companyTypeIds": list(self.external_types)},
        }


_UNANSWERED = object()
#: endpoints that can send extra keys (`World.send_key`)
EXTRA_KEY_ENDPOINTS: tuple[str, ...] = ("company", "connections", "connection", "questionnaire", "template",
                                        "documents")
#: characters a document id added through :meth:`World.add_document` may use (a URL path segment)
_DOCUMENT_ID_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")
_ANSWER_CACHE_SIZE = 4096


class World:
    """The complete, deterministic state the sandbox serves.

    Read methods return JSON-ready Python objects (callers must not mutate
    them). ``namespaces`` lists the user's current company ids (revoked ones
    excluded).
    """

    def __init__(self, *, scale: str, seed: int, drift: bool, today: date,
                 companies: dict[str, dict[str, Any]], namespaces: list[Namespace]) -> None:
        self.scale = scale
        #: the connections the namespaces list in all, when set apart from the scale
        self.connections: int | None = None
        self.seed = seed
        self.drift = drift
        self.today = today
        self.companies = companies
        self.company_types = [{"id": tid, "label": label} for tid, label in vocab.COMPANY_TYPES]
        self._namespaces = {ns.company_id: ns for ns in namespaces}
        self._revoked: set[str] = set()
        self.generation = 0
        #: how many times :func:`sandbox.changes.apply_changes` changed this world
        self.changes_made = 0
        self._lock = threading.RLock()
        self.templates = {
            tid: gen.build_template(seed, tid, label, drift) for tid, label in vocab.COMPANY_TYPES
        }
        # answers are generated from the templates as built, whatever edits followed
        self._generated_templates = dict(self.templates)
        #: endpoint -> extra top-level keys sent on each of its objects (see :meth:`send_key`)
        self.extra_keys: dict[str, dict[str, Any]] = {}
        #: field ids added by `add_template_field`: the generated answers never fill them
        self._added_fields: set[str] = set()
        self._field_type: dict[str, str] = {}
        self._field_spec: dict[str, gen.FieldSpec] = {}
        for tid, template in self.templates.items():
            for spec in template.fields:
                self._field_type[spec.id] = tid
                self._field_spec[spec.id] = spec
        self._answers: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self._overrides: dict[tuple[str, str], dict[str, Any]] = {}
        self._stats: dict[tuple[str, str], QuestionnaireStats] = {}
        self._docs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._doc_owner: dict[str, tuple[str, str]] = {}
        self._doc_index_complete = False
        self._truth: tuple[int, dict[str, Any]] | None = None
        self._template_types: dict[str, list[str]] = {}
        #: document id -> bytes appended to its file (`sandbox.hostile`)
        self.file_padding: dict[str, int] = {}
        #: document ids whose file answers 404 (`sandbox.hostile`)
        self.missing_files: set[str] = set()
        #: documents whose file URL redirects to itself, for ever
        self.looping_files: set[str] = set()
        #: serves the hostile data of `sandbox.hostile`
        self.hostile = False

    # ------------------------------------------------------------ structure

    @property
    def namespaces(self) -> list[str]:
        """The user's current company ids, in role order."""
        return [cid for cid in self._namespaces if cid not in self._revoked]

    def namespace(self, company_id: str) -> Namespace | None:
        """The namespace ``company_id`` if the user currently belongs to it."""
        if company_id in self._revoked:
            return None
        return self._namespaces.get(company_id)

    def user_info(self, email: str) -> dict[str, Any]:
        """Endpoint 3 body: ``{"roles": [...], "email": email}``."""
        return {"roles": [self._namespaces[c].role() for c in self.namespaces], "email": email}

    def company_for(self, ns_id: str, company_id: str) -> dict[str, Any] | None:
        """Endpoint 4: details of the namespace itself or of a listed connection
        (ghosts included); None (404) for any other company."""
        ns = self._namespaces[ns_id]
        if company_id == ns_id or company_id in ns.by_id:
            return self.companies[company_id]
        return None

    def connection_list(self, ns_id: str) -> list[dict[str, Any]]:
        """Endpoint 5: ``[{id, name}, ...]`` of every listed connection, in order."""
        out = []
        for conn in self._namespaces[ns_id].connections:
            entry: dict[str, Any] = {"id": conn.company_id,
                                     "name": self.companies[conn.company_id]["name"]}
            if self.drift:
                entry["status"] = "ACTIVE"
            out.append(entry)
        return out

    def connection_detail(self, ns_id: str, company_id: str) -> dict[str, Any] | None:
        """Endpoint 6 body, or None (404) for non-connections and ghosts."""
        conn = self._namespaces[ns_id].by_id.get(company_id)
        if conn is None or conn.ghost:
            return None
        company = self.companies[company_id]
        detail: dict[str, Any] = {
            "id": company_id,
            "name": company["name"],
            "country": company["country"],
            "readingRights": {
                "given": {"companyTypeIds": list(conn.given)},
                "received": {"companyTypeIds": list(conn.received)},
            },
        }
        if self.drift:
            year = 2015 + gen.h64(self.seed, ns_id, company_id) % 9
            detail["connectedSince"] = f"{year}-01-15T09:30:00"
        return detail

    def access(self, ns_id: str, company_id: str, type_id: str) -> Access:
        """May namespace ``ns_id`` read ``company_id``'s data of ``type_id``?

        OK when the company is the namespace and the type is in its role's
        ``internal.companyTypeIds``, or the company is a (non-ghost) connection
        and the type is in that connection's ``received.companyTypeIds``.
        """
        ns = self._namespaces[ns_id]
        if company_id == ns_id:
            return Access.OK if type_id in ns.internal_types else Access.FORBIDDEN
        conn = ns.by_id.get(company_id)
        if conn is None or conn.ghost:
            return Access.NOT_FOUND
        return Access.OK if type_id in conn.received else Access.FORBIDDEN

    def readable_pairs(self, ns_id: str) -> list[tuple[str, str]]:
        """Every (company_id, company_type_id) the namespace may read: its own
        internal types first, then each non-ghost connection's received types in
        listing order."""
        ns = self._namespaces[ns_id]
        pairs = [(ns_id, t) for t in ns.internal_types]
        for conn in ns.connections:
            if not conn.ghost:
                pairs.extend((conn.company_id, t) for t in conn.received)
        return pairs

    def template_types(self, ns_id: str) -> list[str]:
        """Company types whose template (endpoint 8) the namespace may read: its
        internal types plus every type received from any connection, in
        catalogue order."""
        found = self._template_types.get(ns_id)
        if found is None:
            ns = self._namespaces[ns_id]
            seen = set(ns.internal_types)
            for conn in ns.connections:
                if not conn.ghost:
                    seen.update(conn.received)
            found = [t["id"] for t in self.company_types if t["id"] in seen]
            self._template_types[ns_id] = found
        return found

    # ------------------------------------------------------------ questionnaires

    def template(self, type_id: str) -> dict[str, Any] | None:
        """Endpoint 8 body for ``type_id`` (no ``information`` anywhere)."""
        template = self.templates.get(type_id)
        if template is None:
            return None
        return {"questionnaires": {"forms": list(template.forms)}}

    def answers(self, company_id: str, type_id: str) -> dict[str, Any]:
        """Field id -> ``information`` of the answered fields of (company, type)."""
        key = (company_id, type_id)
        found = self._answers.get(key)
        if found is not None:
            return found
        answers = gen.make_answers(self.seed, self.companies[company_id],
                                   self._generated_templates[type_id], self.today)
        fields = {spec.id for spec in self.templates[type_id].fields}
        added = self._added_fields
        answers = {fid: info for fid, info in answers.items() if fid in fields and fid not in added}
        for fid, info in self._overrides.get(key, {}).items():
            if fid not in fields:
                continue
            if info is _UNANSWERED:
                answers.pop(fid, None)
            else:
                answers[fid] = info
        self._answers[key] = answers
        if len(self._answers) > _ANSWER_CACHE_SIZE:
            self._answers.popitem(last=False)
        return answers

    def questionnaire(self, company_id: str, type_id: str) -> dict[str, Any]:
        """Endpoint 7 body: the type's forms with ``information`` on answered fields."""
        answers = self.answers(company_id, type_id)
        forms = []
        for form in self.templates[type_id].forms:
            fields = []
            for f in form["fields"]:
                info = answers.get(f["id"])
                fields.append(f if info is None else {**f, "information": info})
            forms.append({**form, "fields": fields})
        return {"questionnaires": {"forms": forms}}

    def field_type_id(self, field_id: str) -> str | None:
        """The company type whose template holds ``field_id`` (None if unknown)."""
        return self._field_type.get(field_id)

    def questionnaire_stats(self, company_id: str, type_id: str) -> QuestionnaireStats:
        """Field counts of one questionnaire (memoised; see :class:`QuestionnaireStats`)."""
        key = (company_id, type_id)
        found = self._stats.get(key)
        if found is None:
            found = QuestionnaireStats.of(self.templates[type_id],
                                          self.answers(company_id, type_id))
            self._stats[key] = found
        return found

    def set_answer(self, company_id: str, type_id: str, field_id: str,
                   information: dict[str, Any] | None) -> None:
        """Set (or with ``None`` remove) the answer of one field of a company's
        questionnaire; every namespace that reads it sees the change."""
        if company_id not in self.companies:
            raise KeyError(f"unknown company {company_id}")
        if self._field_type.get(field_id) != type_id:
            raise KeyError(f"field {field_id} is not part of company type {type_id}")
        if self._field_spec[field_id].type == gen.LABEL and information is not None:
            raise ValueError("Label fields carry no answer")
        if information is not None and not isinstance(information, dict):
            raise ValueError("information must be an object or null")
        with self._lock:
            key = (company_id, type_id)
            self._overrides.setdefault(key, {})[field_id] = (
                _UNANSWERED if information is None else information)
            self._answers.pop(key, None)
            self._stats.pop(key, None)
            self.generation += 1

    # ------------------------------------------------------------ documents

    def documents(self, company_id: str, type_id: str) -> list[dict[str, Any]]:
        """Endpoint 10 body: documents of (company, type), memoised and mutable
        through :meth:`update_document` / :meth:`delete_document`. A namespace's
        own company always has at least one document per company type."""
        key = (company_id, type_id)
        docs = self._docs.get(key)
        if docs is None:
            own = company_id in self._namespaces
            docs = gen.make_documents(self.seed, company_id, type_id, self.today, self.drift,
                                      at_least=1 if own else 0,
                                      force_examples=self.drift and own)
            self._docs[key] = docs
            for doc in docs:
                self._doc_owner[doc["id"]] = key
        return docs

    def document(self, document_id: str) -> tuple[str, str, dict[str, Any]] | None:
        """(company_id, type_id, document) for a document id, or None."""
        owner = self._doc_owner.get(document_id)
        if owner is None and not self._doc_index_complete:
            with self._lock:
                for ns_id in self._namespaces:
                    for company_id, type_id in self.readable_pairs(ns_id):
                        self.documents(company_id, type_id)
                self._doc_index_complete = True
            owner = self._doc_owner.get(document_id)
        if owner is None:
            return None
        for doc in self._docs[owner]:
            if doc["id"] == document_id:
                return owner[0], owner[1], doc
        return None

    def document_file(self, document_id: str) -> tuple[str, bytes] | None:
        """(file name, bytes) of a document, or None if it does not exist."""
        found = self.document(document_id)
        if found is None or document_id in self.missing_files:
            return None
        company_id, _, doc = found
        content = gen.render_file(doc, self.companies[company_id]["name"])
        padding = self.file_padding.get(document_id, 0)
        if padding:
            content += b"\n%" + b"x" * padding
        return str(doc.get("name", document_id)), content

    def update_document(self, document_id: str, *, set_fields: dict[str, Any] | None = None,
                        unset: list[str] | None = None) -> dict[str, Any]:
        """Change a document: ``set_fields`` assigns properties (``None`` makes
        them null), ``unset`` removes keys. ``id`` cannot change."""
        found = self.document(document_id)
        if found is None:
            raise KeyError(f"unknown document {document_id}")
        doc = found[2]
        with self._lock:
            for key, value in (set_fields or {}).items():
                if key != "id":
                    doc[key] = value
            for key in unset or []:
                if key != "id":
                    doc.pop(key, None)
            self.generation += 1
        return doc

    def add_document(self, company_id: str, type_id: str, document: dict[str, Any]) -> dict[str, Any]:
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
        if company_id not in self.companies:
            raise KeyError(f"unknown company {company_id}")
        if type_id not in self.templates:
            raise KeyError(f"unknown company type {type_id}")
        if not isinstance(document, dict):
            raise ValueError("document must be an object")
        given_id = document.get("id")
        if given_id is not None and (not isinstance(given_id, str) or not given_id
                                     or not set(given_id) <= _DOCUMENT_ID_CHARS):
            raise ValueError("document id must be a non-empty string of letters, digits and -_.~")
        if "name" in document and not isinstance(document["name"], str):
            raise ValueError("document name must be a string")
        with self._lock:
            docs = self.documents(company_id, type_id)
            if given_id is not None:
                if self.document(given_id) is not None:
                    raise ValueError(f"document {given_id} exists already")
                doc_id = given_id
            else:
                attempt = 0
                while True:
                    doc_id = gen.uuid_like(self.seed, "added-document", company_id, type_id,
                                           self.generation, attempt)
                    if self.document(doc_id) is None:
                        break
                    attempt += 1
            kinds = vocab.DOCUMENT_KINDS
            category, doc_type, stem, ext = kinds[gen.h64(self.seed, "added-document", doc_id) % len(kinds)]
            issued = datetime.combine(self.today, time(9))
            doc: dict[str, Any] = {
                "id": doc_id,
                "name": f"{stem}_{self.today.year}.{ext}",
                "category": category,
                "type": doc_type,
                "issueDate": gen.timestamp(issued),
                "expirationDate": gen.timestamp(issued + timedelta(days=365)),
                **{k: v for k, v in document.items() if k != "id"},
            }
            if self.drift:
                pdf = str(doc["name"]).endswith(".pdf")
                doc.setdefault("mimeType", "application/pdf" if pdf else "application/octet-stream")
                if "sizeBytes" not in doc:
                    doc["sizeBytes"] = self._file_size(company_id, doc)
            docs.append(doc)
            self._doc_owner[doc_id] = (company_id, type_id)
            self.generation += 1
            return doc

    def _file_size(self, company_id: str, doc: dict[str, Any]) -> int:
        """The size of the file of ``doc`` once it carries that very size as ``sizeBytes``
        (the file embeds every property, so the size is found by iterating)."""
        owner = str(self.companies[company_id]["name"])
        size = 0
        for _ in range(8):
            found = len(gen.render_file({**doc, "sizeBytes": size}, owner))
            if found == size:
                break
            size = found
        return size

    def delete_document(self, document_id: str) -> None:
        """Remove a document from its company's list."""
        found = self.document(document_id)
        if found is None:
            raise KeyError(f"unknown document {document_id}")
        company_id, type_id, doc = found
        with self._lock:
            self._docs[(company_id, type_id)].remove(doc)
            del self._doc_owner[document_id]
            self.generation += 1

    def revoke_namespace(self, company_id: str) -> None:
        """The user loses company ``company_id``: it leaves the roles, and
        requests made in its namespace answer 403."""
        if company_id not in self._namespaces:
            raise KeyError(f"{company_id} is not one of the user's companies")
        with self._lock:
            self._revoked.add(company_id)
            self.generation += 1

    def remove_connection(self, ns_id: str, company_id: str) -> None:
        """The namespace is no longer connected to ``company_id``: it leaves the
        connections list, and its details and data answer 404 there. Unknown
        namespace or not a connection: KeyError."""
        with self._lock:
            ns = self._member(ns_id)
            conn = ns.by_id.pop(company_id, None)
            if conn is None:
                raise KeyError(f"{company_id} is not a connection of {ns_id}")
            ns.connections.remove(conn)
            self._template_types.pop(ns_id, None)
            self.generation += 1

    def connect(self, ns_id: str, company_id: str, *, received: list[str] | None = None,
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
                    isinstance(t, str) and t in self.templates for t in types)):
                raise ValueError(f"{name} must be a list of known company type ids")
            rights.append(None if types is None else list(dict.fromkeys(types)))
        new_received, new_given = rights
        if not isinstance(company_id, str):
            raise ValueError("company_id must be a string")
        with self._lock:
            ns = self._member(ns_id)
            if company_id not in self.companies or company_id == ns_id:
                raise KeyError(f"{company_id} is not a company {ns_id} can connect to")
            conn = ns.by_id.get(company_id)
            if conn is None:
                conn = Connection(company_id, new_given or [], new_received or [])
                ns.connections.append(conn)
                ns.by_id[company_id] = conn
            else:
                conn.given = conn.given if new_given is None else new_given
                conn.received = conn.received if new_received is None else new_received
            self._template_types.pop(ns_id, None)
            self._doc_index_complete = False  # documents of the newly readable pairs
            self.generation += 1
            return conn

    def _member(self, ns_id: str) -> Namespace:
        """The namespace ``ns_id``; KeyError unless the user currently belongs to it
        (ValueError if it is not a string)."""
        if not isinstance(ns_id, str):
            raise ValueError("namespace must be a company id")
        ns = self.namespace(ns_id)
        if ns is None:
            raise KeyError(f"{ns_id} is not one of the user's companies")
        return ns

    def add_template_field(self, type_id: str, spec: dict[str, Any], form_id: str | None = None) -> None:
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
        with self._lock:
            template = self.templates.get(type_id)
            if template is None:
                raise KeyError(f"unknown company type {type_id}")
            if field_id in self._field_type:
                raise ValueError(f"field {field_id} exists already")
            forms = [dict(form, fields=list(form["fields"])) for form in template.forms]
            index = next((i for i, form in enumerate(forms) if form_id is None or form["id"] == form_id), None)
            if index is None:
                raise KeyError(f"form {form_id} is not in the template of {type_id}")
            forms[index]["fields"].append(field)
            # the spec goes after the form's last field, so `fields` keeps questionnaire order
            before = sum(len(form["fields"]) for form in forms[:index + 1]) - 1
            fields = (*template.fields[:before], field_spec, *template.fields[before:])
            self.templates[type_id] = replace(template, forms=tuple(forms), fields=fields)
            self._field_type[field_id] = type_id
            self._field_spec[field_id] = field_spec
            self._added_fields.add(field_id)
            self._forget_questionnaires(type_id)

    def remove_template_field(self, type_id: str, field_id: str) -> None:
        """Remove a field from the type's template (endpoint 8) and every questionnaire
        of the type (endpoint 7); its answers are gone with it (endpoint 9 answers 404,
        the truth no longer counts them) and do not come back if a field of that id is
        added again. Unknown type, or a field not of that type: KeyError."""
        with self._lock:
            template = self.templates.get(type_id)
            if template is None:
                raise KeyError(f"unknown company type {type_id}")
            if self._field_type.get(field_id) != type_id:
                raise KeyError(f"field {field_id} is not part of company type {type_id}")
            forms = tuple(dict(form, fields=[f for f in form["fields"] if f["id"] != field_id])
                          for form in template.forms)
            self.templates[type_id] = replace(template, forms=forms,
                                              fields=tuple(f for f in template.fields if f.id != field_id))
            del self._field_type[field_id]
            del self._field_spec[field_id]
            for key, overrides in self._overrides.items():
                if key[1] == type_id:
                    overrides.pop(field_id, None)
            self._forget_questionnaires(type_id)

    def _forget_questionnaires(self, type_id: str) -> None:
        """Drop the memoised answers and stats of every questionnaire of ``type_id``
        and bump the generation (call with the lock held)."""
        for cache in (self._answers, self._stats):
            for key in [key for key in cache if key[1] == type_id]:
                del cache[key]
        self.generation += 1

    def send_key(self, endpoint: str, key: str, value: Any = None, *, remove: bool = False) -> dict[str, Any]:
        """From now on every object of ``endpoint`` carries the top-level ``key`` with
        ``value`` (a key the service starts sending), or, with ``remove``, no longer does
        (removing a key not sent changes nothing). Endpoints: ``company`` (4, the body),
        ``connections`` (5, each entry), ``connection`` (6, the body), ``questionnaire``
        (7) and ``template`` (8, the body's top level), ``documents`` (10, each document).
        An object that carries the key already (natively, or set on it) keeps its own
        value. Unknown endpoint, or a key that is not a non-empty string: ValueError.
        Returns the extra keys per endpoint (:meth:`sent_keys`)."""
        if endpoint not in EXTRA_KEY_ENDPOINTS:
            raise ValueError(f"endpoint must be one of {', '.join(EXTRA_KEY_ENDPOINTS)}")
        if not isinstance(key, str) or not key:
            raise ValueError("key must be a non-empty string")
        with self._lock:
            extras = self.extra_keys.setdefault(endpoint, {})
            if remove:
                if key in extras:
                    del extras[key]
                    self.generation += 1
            else:
                extras[key] = value
                self.generation += 1
            return self.sent_keys()

    def sent_keys(self) -> dict[str, dict[str, Any]]:
        """Endpoint -> the extra keys (and values) it sends (:meth:`send_key`)."""
        return {name: dict(keys) for name, keys in self.extra_keys.items() if keys}

    def with_keys(self, endpoint: str, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` followed by the extra keys of ``endpoint`` that it does not carry
        already (``body`` itself when there are none)."""
        extras = self.extra_keys.get(endpoint)
        if not extras:
            return body
        return {**body, **{k: v for k, v in extras.items() if k not in body}}

    def empty_namespace(self, ns_id: str) -> None:
        """The namespace keeps no connections and no company types of its own:
        it still exists, and every list it reads is empty."""
        with self._lock:
            ns = self._namespaces[ns_id]
            ns.connections.clear()
            ns.by_id.clear()
            ns.internal_types.clear()
            self._template_types.pop(ns_id, None)
            self.generation += 1

    # ------------------------------------------------------------ truth

    def truth(self) -> dict[str, Any]:
        """Ground truth of the current state; see :func:`sandbox.truth.compute_truth`
        for the meaning of every count. Cached until the world changes."""
        with self._lock:
            if self._truth is None or self._truth[0] != self.generation:
                self._truth = (self.generation, compute_truth(self))
            return self._truth[1]
