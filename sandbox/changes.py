"""Realistic changes to a running sandbox's world: what a counterparty does between syncs.

:func:`apply_changes` revises answers, renews or shortens documents, ends connections,
adds a question to a template and makes the service send a new key, each on the next
items in a fixed order (so two worlds of the same seed change alike), and says what it
did, one line each. ``diligence sandbox change`` (through ``POST /_sandbox/change``) and
the tests use it, so the change feed (``analytics.changes``) can be seen working on the
sandbox: sync, change, sync again, ``diligence changes``.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from . import edits
from . import generate as gen
from .world import World

__all__ = ["Changes", "apply_changes"]


@dataclass(frozen=True)
class Changes:
    """How many of each kind of change to make."""

    answers: int = 0
    documents: int = 0
    connections: int = 0
    template_field: bool = False
    key: str | None = None

    @classmethod
    def of(cls, body: dict[str, Any]) -> Changes:
        """From an admin request's body (ValueError: not a whole number, or negative)."""
        counts = {}
        for name in ("answers", "documents", "connections"):
            value = body.get(name, 0)
            if type(value) is not int or value < 0 or value > 1000:
                raise ValueError(f"{name} must be a whole number from 0 to 1000")
            counts[name] = value
        key = body.get("key")
        if key is not None and (not isinstance(key, str) or not key.strip()):
            raise ValueError("key must be a non-empty string")
        return cls(**counts, template_field=bool(body.get("template_field")), key=key)


@dataclass
class _Made:
    lines: list[str] = field(default_factory=list)


def _name(world: World, company_id: str) -> str:
    return str(world.companies[company_id]["name"])


def _counterparties(world: World) -> list[tuple[str, str, str]]:
    """(namespace, company, company type) of every readable questionnaire of a
    connection, in a fixed order."""
    return [(ns, company, type_id) for ns in world.namespaces for company, type_id in world.readable_pairs(ns)
            if company != ns]


def _revise(world: World, company: str, type_id: str, turn: int) -> str | None:
    """Give the first answered Input or Dropdown field of the questionnaire a new answer."""
    answers = world.answers(company, type_id)
    for spec in world.templates[type_id].fields:
        old = answers.get(spec.id)
        if old is None or spec.type not in (gen.INPUT, gen.DROPDOWN):
            continue
        if spec.type == gen.INPUT:
            value = str(old.get("value", ""))
            revised = str(int(value) * (100 + 5 * turn) // 100) if value.isdigit() else f"{value} (revised)".strip()
            new: dict[str, Any] = {"value": revised}
            said = revised
        else:
            chosen = {o.get("id") for o in old.get("options", []) if isinstance(o, dict)}
            other = next((o for o in spec.options or () if o["id"] not in chosen), None)
            if other is None:
                continue
            new, said = {"options": [dict(other)]}, other["value"]
        edits.set_answer(world, company, type_id, spec.id, new)
        return f"answer changed: {_name(world, company)}, {spec.label or spec.id}: now {said!r}"
    return None


def apply_changes(world: World, changes: Changes) -> list[str]:
    """Make `changes` to `world` (see the module docstring); one line per change."""
    made = _Made()
    world.changes_made += 1
    turn = world.changes_made
    pairs = _counterparties(world)
    start = (turn - 1) * max(1, changes.answers + changes.documents) % max(1, len(pairs))
    ordered = pairs[start:] + pairs[:start]
    revised = 0
    for _ns, company, type_id in ordered:
        if revised == changes.answers:
            break
        line = _revise(world, company, type_id, turn)
        if line is not None:
            made.lines.append(line)
            revised += 1
    documents = (doc for _ns, company, type_id in ordered for doc in world.documents(company, type_id))
    for count, doc in enumerate(itertools.islice(documents, changes.documents)):
        owner = world.document(doc["id"])
        company = owner[0] if owner else ""
        if count % 2 == 0:  # renewed for a year
            expires = (world.today + timedelta(days=365 + count)).isoformat() + "T00:00:00"
            what = "renewed"
        else:  # about to expire
            expires = (world.today + timedelta(days=7)).isoformat() + "T00:00:00"
            what = "now expires in 7 days"
        edits.update_document(world, doc["id"], set_fields={"expirationDate": expires})
        made.lines.append(f"document {what}: {_name(world, company)}, {doc.get('name', doc['id'])} "
                          f"(expires {expires[:10]})")
    for ns in itertools.islice(itertools.cycle(world.namespaces), changes.connections):
        connections = world.connection_list(ns)
        if connections:  # the namespace's last connection ends
            company = connections[-1]["id"]
            edits.remove_connection(world, ns, company)
            made.lines.append(f"connection removed: {_name(world, ns)} no longer connected to {_name(world, company)}")
    if changes.template_field:
        type_id = sorted(world.templates)[0]
        field_id = f"fld-added-{turn}"
        edits.add_template_field(world, type_id, {"id": field_id, "type": gen.INPUT,
                                                  "label": f"Sanctions screening provider ({turn})"})
        made.lines.append(f"question added to the {type_id} questionnaire: Sanctions screening provider ({turn})")
    if changes.key:
        edits.send_key(world, "company", changes.key, f"sent since change {turn}")
        made.lines.append(f"the service now sends the company key {changes.key!r}")
    return made.lines
