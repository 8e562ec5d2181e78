"""The sandbox's world as the routes read it: who is connected to whom, with which
rights, their answers and documents, and the truth.

:func:`sandbox.data.build_world` lays out the structure (companies, namespaces,
connections, reading rights); :class:`World` builds the templates and serves the rest.
Questionnaire answers and documents are generated on demand from a hash of (seed,
company, company type) by :mod:`sandbox.generate` and memoised, so a company's answers
are its own and identical whichever namespace reads them.

:mod:`sandbox.edits` changes the world: it changes the state (the attributes
:class:`World` documents as such) holding :attr:`World.lock`, tells the world which of
its memos and indexes the change outdated (the methods under "after an edit"), and
bumps :attr:`World.generation`, which the HTTP app watches to drop its cached response
bytes.
"""

from __future__ import annotations

import enum
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from sandbox import generate as gen
from sandbox import vocab
from sandbox.truth import QuestionnaireStats, compute_truth

__all__ = ["UNANSWERED", "Access", "Connection", "Namespace", "World"]


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


#: an answer an edit removed (in :attr:`World.overrides`)
UNANSWERED = object()
_ANSWER_CACHE_SIZE = 4096


class World:
    """The complete, deterministic state the sandbox serves.

    Read methods return JSON-ready Python objects (callers must not mutate
    them; :mod:`sandbox.edits` alone changes documents in place). ``namespaces``
    lists the user's current company ids (revoked ones excluded).
    """

    def __init__(self, *, scale: str, seed: int, drift: bool, today: date,
                 companies: dict[str, dict[str, Any]], namespaces: list[Namespace]) -> None:
        self.scale = scale
        #: the connections the namespaces list in all, when set apart from the scale
        self.connections: int | None = None
        self.seed = seed
        self.drift = drift
        self.today = today
        self.company_types = [{"id": tid, "label": label} for tid, label in vocab.COMPANY_TYPES]
        #: bumped by every change (:mod:`sandbox.edits`)
        self.generation = 0
        #: how many times :func:`sandbox.changes.apply_changes` changed this world
        self.changes_made = 0
        #: held by every change, and by a read that fills a shared index
        self.lock = threading.RLock()
        # the state, which sandbox.edits changes
        self.companies = companies
        #: every namespace the world was built with, revoked ones too, by company id
        self.all_namespaces = {ns.company_id: ns for ns in namespaces}
        #: the namespaces the user no longer belongs to
        self.revoked: set[str] = set()
        self.templates = {
            tid: gen.build_template(seed, tid, label, drift) for tid, label in vocab.COMPANY_TYPES
        }
        #: (company, type) -> field id -> the answer an edit set, or `UNANSWERED`
        self.overrides: dict[tuple[str, str], dict[str, Any]] = {}
        #: field ids an edit added to a template: the generated answers never fill them
        self.added_fields: set[str] = set()
        #: endpoint -> extra top-level keys sent on each of its objects
        self.extra_keys: dict[str, dict[str, Any]] = {}
        #: document id -> bytes appended to its file (`sandbox.hostile`)
        self.file_padding: dict[str, int] = {}
        #: document ids whose file answers 404 (`sandbox.hostile`)
        self.missing_files: set[str] = set()
        #: documents whose file URL redirects to itself, for ever
        self.looping_files: set[str] = set()
        #: serves the hostile data of `sandbox.hostile`
        self.hostile = False
        # what the reads derive from the state, memoised (answers are generated from
        # the templates as built, whatever edits followed)
        self._generated_templates = dict(self.templates)
        self._field_type: dict[str, str] = {}
        self._field_spec: dict[str, gen.FieldSpec] = {}
        for tid in self.templates:
            self._index_fields(tid)
        self._answers: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()
        self._stats: dict[tuple[str, str], QuestionnaireStats] = {}
        self._docs: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._doc_owner: dict[str, tuple[str, str]] = {}
        self._doc_index_complete = False
        self._truth: tuple[int, dict[str, Any]] | None = None
        self._template_types: dict[str, list[str]] = {}

    # ------------------------------------------------------------ structure

    @property
    def namespaces(self) -> list[str]:
        """The user's current company ids, in role order."""
        return [cid for cid in self.all_namespaces if cid not in self.revoked]

    def namespace(self, company_id: str) -> Namespace | None:
        """The namespace ``company_id`` if the user currently belongs to it."""
        if company_id in self.revoked:
            return None
        return self.all_namespaces.get(company_id)

    def user_info(self, email: str) -> dict[str, Any]:
        """Endpoint 3 body: ``{"roles": [...], "email": email}``."""
        return {"roles": [self.all_namespaces[c].role() for c in self.namespaces], "email": email}

    def company_for(self, ns_id: str, company_id: str) -> dict[str, Any] | None:
        """Endpoint 4: details of the namespace itself or of a listed connection
        (ghosts included); None (404) for any other company."""
        ns = self.all_namespaces[ns_id]
        if company_id == ns_id or company_id in ns.by_id:
            return self.companies[company_id]
        return None

    def connection_list(self, ns_id: str) -> list[dict[str, Any]]:
        """Endpoint 5: ``[{id, name}, ...]`` of every listed connection, in order."""
        out = []
        for conn in self.all_namespaces[ns_id].connections:
            entry: dict[str, Any] = {"id": conn.company_id,
                                     "name": self.companies[conn.company_id]["name"]}
            if self.drift:
                entry["status"] = "ACTIVE"
            out.append(entry)
        return out

    def connection_detail(self, ns_id: str, company_id: str) -> dict[str, Any] | None:
        """Endpoint 6 body, or None (404) for non-connections and ghosts."""
        conn = self.all_namespaces[ns_id].by_id.get(company_id)
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
        ns = self.all_namespaces[ns_id]
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
        ns = self.all_namespaces[ns_id]
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
            ns = self.all_namespaces[ns_id]
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
        added = self.added_fields
        answers = {fid: info for fid, info in answers.items() if fid in fields and fid not in added}
        for fid, info in self.overrides.get(key, {}).items():
            if fid not in fields:
                continue
            if info is UNANSWERED:
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

    def field_spec(self, field_id: str) -> gen.FieldSpec | None:
        """The spec of ``field_id`` in its type's template (None if unknown)."""
        return self._field_spec.get(field_id)

    def questionnaire_stats(self, company_id: str, type_id: str) -> QuestionnaireStats:
        """Field counts of one questionnaire (memoised; see :class:`QuestionnaireStats`)."""
        key = (company_id, type_id)
        found = self._stats.get(key)
        if found is None:
            found = QuestionnaireStats.of(self.templates[type_id],
                                          self.answers(company_id, type_id))
            self._stats[key] = found
        return found

    # ------------------------------------------------------------ documents

    def documents(self, company_id: str, type_id: str) -> list[dict[str, Any]]:
        """Endpoint 10 body: documents of (company, type), generated once and then kept
        (:mod:`sandbox.edits` changes them in place). A namespace's own company always
        has at least one document per company type."""
        key = (company_id, type_id)
        docs = self._docs.get(key)
        if docs is None:
            own = company_id in self.all_namespaces
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
            with self.lock:
                for ns_id in self.all_namespaces:
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

    # ------------------------------------------------------------ extra keys

    def sent_keys(self) -> dict[str, dict[str, Any]]:
        """Endpoint -> the extra keys (and values) it sends (:func:`sandbox.edits.send_key`)."""
        return {name: dict(keys) for name, keys in self.extra_keys.items() if keys}

    def with_keys(self, endpoint: str, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` followed by the extra keys of ``endpoint`` that it does not carry
        already (``body`` itself when there are none)."""
        extras = self.extra_keys.get(endpoint)
        if not extras:
            return body
        return {**body, **{k: v for k, v in extras.items() if k not in body}}

    # ------------------------------------------------------------ truth

    def truth(self) -> dict[str, Any]:
        """Ground truth of the current state; see :func:`sandbox.truth.compute_truth`
        for the meaning of every count. Cached until the world changes."""
        with self.lock:
            if self._truth is None or self._truth[0] != self.generation:
                self._truth = (self.generation, compute_truth(self))
            return self._truth[1]

    # ------------------------------------------------------------ after an edit

    def forget_answers(self, company_id: str, type_id: str) -> None:
        """The overrides of one questionnaire changed: drop its memoised answers and stats."""
        key = (company_id, type_id)
        self._answers.pop(key, None)
        self._stats.pop(key, None)

    def forget_template(self, type_id: str) -> None:
        """The template of ``type_id`` changed: index its fields again, and drop the
        memoised answers and stats of every questionnaire of the type."""
        for field_id in [f for f, t in self._field_type.items() if t == type_id]:
            del self._field_type[field_id]
            del self._field_spec[field_id]
        self._index_fields(type_id)
        for cache in (self._answers, self._stats):
            for key in [key for key in cache if key[1] == type_id]:
                del cache[key]

    def _index_fields(self, type_id: str) -> None:
        for spec in self.templates[type_id].fields:
            self._field_type[spec.id] = type_id
            self._field_spec[spec.id] = spec

    def forget_rights(self, ns_id: str) -> None:
        """The namespace's connections or their rights changed: drop its memoised
        readable template types."""
        self._template_types.pop(ns_id, None)

    def forget_document_index(self) -> None:
        """Pairs became readable: the next lookup of an unknown document id indexes the
        documents of every readable pair again."""
        self._doc_index_complete = False

    def index_document(self, document_id: str, company_id: str, type_id: str) -> None:
        """A document was added to (company, type)'s list: :meth:`document` finds it."""
        self._doc_owner[document_id] = (company_id, type_id)

    def unindex_document(self, document_id: str) -> None:
        """A document was removed from its list: :meth:`document` no longer finds it."""
        del self._doc_owner[document_id]
