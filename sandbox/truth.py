"""Ground truth of a sandbox world: what a complete, correct sync must find.

:func:`compute_truth` walks the world the same way the HTTP endpoints expose
it, so every count here equals what a client gets by calling every endpoint
once. The result is JSON-ready and served at ``GET /_sandbox/truth``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sandbox import generate as gen

if TYPE_CHECKING:
    from sandbox.world import World


@dataclass(frozen=True)
class QuestionnaireStats:
    """Field counts of one questionnaire (one company x company type).

    - ``fields``: every field of every form, ``Label`` included.
    - ``answerable``: fields whose type is not ``Label`` (unknown drift types
      and option-less choice fields included).
    - ``answered``: fields that carry an ``information`` key.
    - ``checkbox_multi``: ``Checkbox`` fields answered with more than one option.
    - ``by_type``: field count per ``type`` value, ``Label`` included.
    """

    fields: int
    answerable: int
    answered: int
    checkbox_multi: int
    by_type: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, template: gen.Template, answers: dict[str, dict[str, Any]]) -> QuestionnaireStats:
        """Count ``template``'s fields against the ``answers`` given to it."""
        by_type: Counter[str] = Counter()
        answerable = answered = multi = 0
        for spec in template.fields:
            by_type[spec.type] += 1
            if spec.type != gen.LABEL:
                answerable += 1
            info = answers.get(spec.id)
            if info is not None:
                answered += 1
                if spec.type == gen.CHECKBOX and len(info.get("options", ())) > 1:
                    multi += 1
        return cls(len(template.fields), answerable, answered, multi,
                   tuple(sorted(by_type.items())))


def _parse_day(value: str) -> date | None:
    try:
        return datetime.strptime(value, gen.TIMESTAMP_FORMAT).date()
    except (TypeError, ValueError):
        return None


def document_counts(docs: list[dict[str, Any]], today: date) -> Counter[str]:
    """Counts over documents:

    - ``total``: documents listed.
    - ``null_expiry``: ``expirationDate`` present and null.
    - ``missing_expiry``: no ``expirationDate`` key.
    - ``expired``: expiration day (date part) before ``today``.
    - ``expiring_30d``: expiration day from ``today`` to ``today + 30 days`` inclusive.
    """
    counts: Counter[str] = Counter(total=0, null_expiry=0, missing_expiry=0,
                                   expired=0, expiring_30d=0)
    horizon = today + timedelta(days=30)
    for doc in docs:
        counts["total"] += 1
        if "expirationDate" not in doc:
            counts["missing_expiry"] += 1
            continue
        if doc["expirationDate"] is None:
            counts["null_expiry"] += 1
            continue
        day = _parse_day(doc["expirationDate"])
        if day is None:
            continue
        if day < today:
            counts["expired"] += 1
        elif day <= horizon:
            counts["expiring_30d"] += 1
    return counts


def namespace_truth(world: World, ns_id: str) -> dict[str, Any]:
    """Truth for one namespace. Keys:

    - ``connection_ids``: company ids listed by endpoint 5, in order.
    - ``connections``: how many are listed (ghosts included).
    - ``detail_404``: listed connections whose detail (endpoint 6) answers 404;
      their questionnaires and documents answer 404 as well.
    - ``no_received_rights``: connections whose detail answers 200 with an
      empty ``received.companyTypeIds`` (so nothing of theirs is readable).
    - ``questionnaires``: readable ``[company_id, company_type_id]`` pairs:
      the namespace's own internal types, then each non-ghost connection's
      received types (endpoint 7 and 10 answer 200 for exactly these).
    - ``questionnaire_count``: ``len(questionnaires)``.
    - ``documents``: :func:`document_counts` summed over the readable pairs.
    - ``fields``, ``answerable_fields``, ``answered_fields``, ``checkbox_multi``,
      ``field_types``: :class:`QuestionnaireStats` summed over the readable
      pairs (a questionnaire readable through two namespaces counts in both).
    - ``template_type_ids``: company types whose template (endpoint 8) answers
      200: internal types plus types received from any connection.
    - ``expected_requests``: 1 (own company, endpoint 4) + 1 (list, 5)
      + 2 per listed connection (4 and 6) + 2 per readable questionnaire
      (7 and 10) + 1 per template type (8).
    """
    ns = world.namespace(ns_id)
    assert ns is not None
    pairs = world.readable_pairs(ns_id)
    docs: Counter[str] = Counter(total=0, null_expiry=0, missing_expiry=0,
                                 expired=0, expiring_30d=0)
    by_type: Counter[str] = Counter()
    fields = answerable = answered = multi = 0
    for company_id, type_id in pairs:
        stats = world.questionnaire_stats(company_id, type_id)
        fields += stats.fields
        answerable += stats.answerable
        answered += stats.answered
        multi += stats.checkbox_multi
        by_type.update(dict(stats.by_type))
        docs.update(document_counts(world.documents(company_id, type_id), world.today))
    templates = world.template_types(ns_id)
    connection_ids = [c.company_id for c in ns.connections]
    return {
        "company_id": ns_id,
        "internal_type_ids": list(ns.internal_types),
        "connection_ids": connection_ids,
        "connections": len(connection_ids),
        "detail_404": [c.company_id for c in ns.connections if c.ghost],
        "no_received_rights": [c.company_id for c in ns.connections
                               if not c.ghost and not c.received],
        "questionnaires": [[c, t] for c, t in pairs],
        "questionnaire_count": len(pairs),
        "documents": dict(docs),
        "fields": fields,
        "answerable_fields": answerable,
        "answered_fields": answered,
        "checkbox_multi": multi,
        "field_types": dict(sorted(by_type.items())),
        "template_type_ids": list(templates),
        "expected_requests": 2 + 2 * len(connection_ids) + 2 * len(pairs) + len(templates),
    }


def compute_truth(world: World) -> dict[str, Any]:
    """Ground truth of the whole world. Top-level keys:

    - ``scale``, ``seed``, ``drift``, ``today`` (ISO date anchoring document dates).
    - ``namespaces``: the user's current company ids (endpoint 3 roles).
    - ``per_namespace``: :func:`namespace_truth` for each of them.
    - ``totals``: sums over namespaces of ``connections``,
      ``questionnaires``, ``documents`` (total), ``answerable_fields`` and
      ``answered_fields``; ``distinct_connections`` counts each connected
      company once.
    - ``expected_requests``: requests of one full sync of every namespace:
      1 (user-info) + the namespaces' ``expected_requests``. Logins (endpoint 1),
      renewals, retries and document downloads are not counted.
    """
    per_ns = {ns_id: namespace_truth(world, ns_id) for ns_id in world.namespaces}
    distinct = {cid for t in per_ns.values() for cid in t["connection_ids"]}
    return {
        "scale": world.scale,
        "seed": world.seed,
        "drift": world.drift,
        "today": world.today.isoformat(),
        "namespaces": list(per_ns),
        "per_namespace": per_ns,
        "totals": {
            "connections": sum(t["connections"] for t in per_ns.values()),
            "distinct_connections": len(distinct),
            "questionnaires": sum(t["questionnaire_count"] for t in per_ns.values()),
            "documents": sum(t["documents"]["total"] for t in per_ns.values()),
            "answerable_fields": sum(t["answerable_fields"] for t in per_ns.values()),
            "answered_fields": sum(t["answered_fields"] for t in per_ns.values()),
        },
        "expected_requests": 1 + sum(t["expected_requests"] for t in per_ns.values()),
    }
