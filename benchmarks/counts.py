"""Did the same rows land? Counts per namespace in a warehouse, against the truth."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

#: The entities compared across contenders.
ENTITIES = ("connections", "questionnaires", "documents")


def per_namespace(warehouse: Path, relations: dict[str, str]) -> dict[str, dict[str, int]]:
    """``{namespace: {entity: rows}}`` for ``relations`` (entity -> SQL relation that has
    a ``namespace_company_id`` column). A missing table counts as no rows."""
    counts: dict[str, dict[str, int]] = {}
    con = duckdb.connect(str(warehouse), read_only=True)
    try:
        for entity, relation in relations.items():
            try:
                rows = con.execute(
                    f"select namespace_company_id, count(*) from {relation} group by 1"
                ).fetchall()
            except duckdb.CatalogException:
                rows = []
            for ns, n in rows:
                counts.setdefault(str(ns), {})[entity] = int(n)
    finally:
        con.close()
    for values in counts.values():
        for entity in relations:
            values.setdefault(entity, 0)
    return counts


def truth_counts(truth: dict[str, Any], namespaces: list[str] | None = None) -> dict[str, dict[str, int]]:
    """The same counts from the sandbox's ground truth."""
    wanted = namespaces or truth["namespaces"]
    return {
        ns: {
            "connections": t["connections"],
            "questionnaires": t["questionnaire_count"],
            "documents": t["documents"]["total"],
        }
        for ns, t in truth["per_namespace"].items()
        if ns in wanted
    }


def differences(found: dict[str, dict[str, int]], expected: dict[str, dict[str, int]]) -> list[str]:
    """Human-readable differences (empty when every count matches)."""
    out = []
    for ns in sorted(set(found) | set(expected)):
        for entity in ENTITIES:
            got = found.get(ns, {}).get(entity, 0)
            want = expected.get(ns, {}).get(entity, 0)
            if got != want:
                out.append(f"{ns[:8]}… {entity}: {got} (expected {want})")
    return out


def totals(counts: dict[str, dict[str, int]]) -> dict[str, int]:
    """Sum over namespaces per entity."""
    return {e: sum(c.get(e, 0) for c in counts.values()) for e in ENTITIES}
