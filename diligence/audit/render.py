"""The readable files of an auditor's pack, rendered from its ``pack.json`` alone.

``index.html`` (one page, no script, nothing fetched), ``README.md`` and one CSV per
table under ``records/``. Rendering is deterministic: ``diligence verify DIR`` renders
them again and compares, so a readable file changed after the pack was written is
found. Every text that came from the service is escaped (HTML) or guarded (a CSV cell
shows control characters as ``\\xNN``, and one that a spreadsheet would run as a formula
gets a leading ``'``).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import jinja2
import orjson

from ..report.export import FORMULA_TRIGGERS
from ..safe_text import markdown_text, terminal_text

__all__ = ["answers_of", "render_files"]

TEMPLATE = "pack.html.j2"
#: columns of each records CSV, in order
CSV_COLUMNS: dict[str, tuple[str, ...]] = {
    "companies": ("namespace_company_id", "company_id", "name", "country", "city", "lei", "cin",
                  "is_namespace_company"),
    "connections": ("namespace_company_id", "company_id", "name", "country", "given_company_type_ids",
                    "received_company_type_ids", "has_detail"),
    "questionnaires": ("namespace_company_id", "company_id", "company_type_id", "forms_json"),
    "documents": ("namespace_company_id", "company_id", "company_type_id", "document_id", "name", "category",
                  "type", "issue_date", "expiration_date"),
}
_PROVENANCE = ("_dlt_valid_from", "_dlt_valid_to", "sync_id", "response_sha256")


def _environment() -> jinja2.Environment:
    """HTML templates are autoescaped; the markdown one escapes with the ``md`` filter."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("diligence.audit", "templates"),
                             autoescape=jinja2.select_autoescape(["html.j2"]),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["md"] = markdown_text
    return env


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def answers_of(forms_json: str) -> list[dict[str, str]]:
    """One row per answered field of a questionnaire's forms: form, field, answer."""
    try:
        forms = orjson.loads(forms_json)
    except orjson.JSONDecodeError:
        return []
    found = []
    for form in forms if isinstance(forms, list) else []:
        if not isinstance(form, dict):
            continue
        for field in form.get("fields") or []:
            if not isinstance(field, dict) or field.get("information") is None:
                continue
            found.append({"form": _text(form.get("label") or form.get("id")),
                          "field": _text(field.get("label") or field.get("id")),
                          "type": _text(field.get("type")),
                          "answer": _answer(field.get("information"), field.get("options"))})
    return found


def _answer(information: Any, options: Any) -> str:
    """An answer as a reader would say it: the value, or the chosen options' labels."""
    labels = {o.get("id"): o.get("value") for o in options or [] if isinstance(o, dict)}

    def choice(item: Any) -> str:
        if isinstance(item, dict):
            return _text(item.get("value") or labels.get(item.get("id")) or item.get("id"))
        return _text(labels.get(item, item) if isinstance(item, str) else item)

    value = information
    if isinstance(information, dict):
        if isinstance(information.get("options"), list):
            return "; ".join(choice(o) for o in information["options"])
        if "value" not in information:
            return _text(information)
        value = information["value"]
    if isinstance(value, list):
        return "; ".join(choice(v) for v in value)
    return choice(value)


def _cell(value: Any) -> str:
    """A CSV cell: control characters shown as ``\\xNN`` (as the terminal shows them),
    and a formula guarded."""
    text = terminal_text(_text(value) if not isinstance(value, bool) else ("true" if value else "false"))
    return "'" + text if text.startswith(FORMULA_TRIGGERS) else text


def _csv(rows: list[dict[str, Any]], columns: tuple[str, ...]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row.get(c)) for c in columns])
    return buffer.getvalue()


def render_files(pack: dict[str, Any]) -> dict[str, str]:
    """Relative path -> text of each readable file of `pack` (a parsed ``pack.json``)."""
    records: dict[str, list[dict[str, Any]]] = pack["records"]
    companies = records.get("companies", [])
    name = next((c["name"] for c in companies if c.get("name")), None) or pack["company_id"]
    answers = [{**a, "namespace_company_id": q["namespace_company_id"], "company_type_id": q["company_type_id"],
                "response_sha256": q["response_sha256"]}
               for q in records.get("questionnaires", []) for a in answers_of(q["forms_json"])]
    context = {"pack": pack, "name": name, "records": records, "answers": answers,
               "syncs": pack["syncs"], "head": pack["head"],
               "responses": sorted({r["response_sha256"] for rows in records.values() for r in rows
                                    if r.get("response_sha256")})}
    env = _environment()
    files = {"index.html": env.get_template(TEMPLATE).render(**context),
             "README.md": env.get_template("pack.md.j2").render(**context)}
    for table, rows in records.items():
        files[str(Path("records") / f"{table}.csv")] = _csv(rows, (*CSV_COLUMNS[table], *_PROVENANCE))
    if answers:
        files[str(Path("records") / "answers.csv")] = _csv(
            answers, ("namespace_company_id", "company_type_id", "form", "field", "type", "answer",
                      "response_sha256"))
    return files
