"""Admin routes of the sandbox, under ``/_sandbox/`` (no auth, loopback clients only).

- ``GET /_sandbox/truth``: ground truth (:func:`sandbox.truth.compute_truth`).
- ``GET /_sandbox/faults``: current fault switches.
- ``POST /_sandbox/faults``: update switches, body ``{"error_rate": 0.1, ...}``;
  ``"reset": true`` turns all off first. Answers the new switches.
- ``POST /_sandbox/answers``: ``{company_id, company_type_id, field_id, information}``;
  ``information: null`` removes the answer. Every namespace reading that
  company's questionnaire sees the change.
- ``POST /_sandbox/documents``: ``{document_id, set?: {...}, unset?: [keys], delete?: bool}``
  changes or deletes a document;
  ``{"add": {"company_id": C, "company_type_id": T, "document": {...}?}}`` adds one at the
  end of (C, T)'s list (endpoint 10) and answers it: its ``id`` is generated when missing,
  and the properties a generated document has get defaults (see
  :func:`~sandbox.edits.add_document`); endpoint 11 serves its file.
- ``POST /_sandbox/connections`` (:func:`~sandbox.edits.connect`,
  :func:`~sandbox.edits.remove_connection`):
  ``{"namespace": NS, "company_id": C, "remove": true}`` ends a connection and answers
  ``{"removed": C}``; ``{"namespace": NS, "company_id": C, "received": [types]?,
  "given": [types]?}`` makes C (any company but NS) a connection of NS with those reading
  rights (``received``: the types NS reads of C), or replaces the rights of a connection
  (a list left out is kept). Answers ``{"connection": <endpoint 6 body>}``.
- ``POST /_sandbox/templates`` (:func:`~sandbox.edits.add_template_field`,
  :func:`~sandbox.edits.remove_template_field`):
  ``{"company_type_id": T, "add_field": {"id": F, "type": "Input", "label": "...",
  "options": [{id, value}]?}, "form_id": FORM?}`` adds a field at the end of a form (the
  first by default) of T's template and of every questionnaire of T, unanswered (400 if
  any template has a field F already); ``{"company_type_id": T, "remove_field": F}``
  removes one, answers included. Answers the template (endpoint 8 body).
- ``POST /_sandbox/keys`` (:func:`~sandbox.edits.send_key`):
  ``{"endpoint": E, "key": K, "value": V}``: every object of E (``company``: endpoint 4
  body, ``connections``: each entry of 5, ``connection``: 6 body, ``questionnaire``: 7
  body, ``template``: 8 body, ``documents``: each document of 10) carries the extra
  top-level key K from now on (an object that has K already keeps its own value);
  ``{"endpoint": E, "key": K, "remove": true}`` stops it. Answers the extra keys per
  endpoint, ``{E: {K: V}}``; ``GET /_sandbox/keys`` reads them.
- ``POST /_sandbox/change`` (:func:`sandbox.changes.apply_changes`, what ``diligence
  sandbox change`` sends): ``{"answers": N, "documents": N, "connections": N,
  "template_field": true?, "key": "K"?}`` revises N answers, renews or shortens N
  documents' expiry, ends N connections, adds a question to a template, makes the
  company endpoint send the key K; answers ``{"changed": [one line per change]}``.
- ``POST /_sandbox/revoke-namespace``: ``{company_id}``; the user loses that company.
- ``POST /_sandbox/invalidate-tokens``: revoke every token issued so far.
- ``GET /_sandbox/stats``: request counters; ``POST /_sandbox/stats/reset`` zeroes them.
- ``GET|POST /_sandbox/settings``: read / change ``{page_size, url_ttl_seconds}``.

Bad bodies answer 400, unknown ids 404, every body is JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson

from sandbox import edits
from sandbox.changes import Changes, apply_changes

if TYPE_CHECKING:
    from sandbox.app import Receive, Result, SandboxApp, Scope

_LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def _ok(payload: Any) -> Result:
    return 200, orjson.dumps(payload), None


def _fail(status: int, message: str) -> Result:
    return status, orjson.dumps({"message": message}), None


async def _read_json(receive: Receive) -> Any:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    raw = b"".join(chunks)
    return orjson.loads(raw) if raw.strip() else {}


def _is_loopback(scope: Scope) -> bool:
    client = scope.get("client")
    if not client:
        return True
    host = str(client[0])
    return host in _LOOPBACK or host.startswith("127.")


async def handle_admin(app: SandboxApp, scope: Scope, receive: Receive) -> Result:
    """Serve one ``/_sandbox/...`` request against ``app``'s world, faults and auth."""
    if not _is_loopback(scope):
        return _fail(403, "Admin routes are available to loopback clients only")
    name = scope["path"][len("/_sandbox/"):].rstrip("/")
    method = scope["method"]
    if method == "GET":
        if name == "truth":
            return _ok(app.world.truth())
        if name == "faults":
            return _ok(app.faults.to_dict())
        if name == "stats":
            return _ok(app.stats.to_dict())
        if name == "settings":
            return _ok(_settings(app))
        if name == "keys":
            return _ok(app.world.sent_keys())
        return _fail(404, "Unknown admin route")
    if method != "POST":
        return _fail(405, "Method not allowed")
    try:
        body = await _read_json(receive)
    except orjson.JSONDecodeError:
        return _fail(400, "Body must be JSON")
    if not isinstance(body, dict):
        return _fail(400, "Body must be a JSON object")
    try:
        return _post(app, name, body)
    except KeyError as exc:
        return _fail(404, str(exc.args[0]) if exc.args else "Not found")
    except (ValueError, TypeError) as exc:
        return _fail(400, str(exc))


def _settings(app: SandboxApp) -> dict[str, Any]:
    return {"page_size": app.page_size, "url_ttl_seconds": app.url_ttl_seconds}


def _require(body: dict[str, Any], *names: str) -> list[Any]:
    missing = [n for n in names if n not in body]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    return [body[n] for n in names]


def _post(app: SandboxApp, name: str, body: dict[str, Any]) -> Result:
    world = app.world
    if name == "change":
        return _ok({"changed": apply_changes(world, Changes.of(body))})
    if name == "faults":
        changes = dict(body)
        if changes.pop("reset", False):
            app.faults.reset()
        app.faults.update(changes)
        return _ok(app.faults.to_dict())
    if name == "answers":
        company_id, type_id, field_id, information = _require(
            body, "company_id", "company_type_id", "field_id", "information")
        edits.set_answer(world, company_id, type_id, field_id, information)
        return _ok({"ok": True, "generation": world.generation})
    if name == "documents" and "add" in body:
        add = body["add"]
        if not isinstance(add, dict):
            raise ValueError("add must be an object")
        company_id, type_id = _require(add, "company_id", "company_type_id")
        document = add.get("document")
        return _ok(edits.add_document(world, company_id, type_id, {} if document is None else document))
    if name == "connections":
        ns_id, company_id = _require(body, "namespace", "company_id")
        if body.get("remove"):
            edits.remove_connection(world, ns_id, company_id)
            return _ok({"removed": company_id})
        conn = edits.connect(world, ns_id, company_id, received=body.get("received"), given=body.get("given"))
        return _ok({"connection": world.connection_detail(ns_id, conn.company_id)})
    if name == "templates":
        (type_id,) = _require(body, "company_type_id")
        if ("add_field" in body) == ("remove_field" in body):
            raise ValueError("give either add_field or remove_field")
        if "add_field" in body:
            edits.add_template_field(world, type_id, body["add_field"], body.get("form_id"))
        else:
            edits.remove_template_field(world, type_id, body["remove_field"])
        return _ok(world.template(type_id))
    if name == "keys":
        endpoint, key = _require(body, "endpoint", "key")
        if body.get("remove"):
            return _ok(edits.send_key(world, endpoint, key, remove=True))
        (value,) = _require(body, "value")
        return _ok(edits.send_key(world, endpoint, key, value))
    if name == "documents":
        (document_id,) = _require(body, "document_id")
        if body.get("delete"):
            edits.delete_document(world, document_id)
            return _ok({"deleted": document_id})
        set_fields = body.get("set") or {}
        unset = body.get("unset") or []
        if not isinstance(set_fields, dict) or not isinstance(unset, list):
            raise ValueError("set must be an object and unset a list of keys")
        return _ok(edits.update_document(world, document_id, set_fields=set_fields, unset=unset))
    if name == "revoke-namespace":
        (company_id,) = _require(body, "company_id")
        edits.revoke_namespace(world, company_id)
        return _ok({"namespaces": world.namespaces})
    if name == "invalidate-tokens":
        return _ok({"revoked": app.auth.revoke_all()})
    if name == "stats/reset":
        app.stats.reset()
        return _ok(app.stats.to_dict())
    if name == "settings":
        if "page_size" in body:
            size = body["page_size"]
            valid = isinstance(size, int) and not isinstance(size, bool) and size >= 1
            if size is not None and not valid:
                raise ValueError("page_size must be a positive integer or null")
            app.page_size = size
        if "url_ttl_seconds" in body:
            ttl = body["url_ttl_seconds"]
            if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or ttl <= 0:
                raise ValueError("url_ttl_seconds must be a positive number")
            app.url_ttl_seconds = ttl
        return _ok(_settings(app))
    raise KeyError("Unknown admin route")
