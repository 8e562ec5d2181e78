"""Deterministic generators for the sandbox's companies, questionnaires and documents.

Every value is a pure function of the world seed and the identifiers involved:
``rng_for(seed, "answers", company_id, type_id)`` always yields the same random
stream, so any piece of the world can be generated on demand, in any order, and
comes out the same each time. :mod:`sandbox.data` decides *what* exists
(which companies, connections and rights); this module decides what each thing
*looks like*.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from sandbox import vocab

LABEL = "Label"
INPUT = "Input"
DROPDOWN = "Dropdown"
CHECKBOX = "Checkbox"
DATE_PICKER = "DatePicker"  # drift only: answers {"value": "YYYY-MM-DD"}
MULTI_SELECT = "MultiSelect"  # drift only: answers {"values": [option values]}
CHOICE_TYPES = frozenset({DROPDOWN, CHECKBOX, MULTI_SELECT})

TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S"


def _digest(parts: tuple[object, ...], size: int) -> bytes:
    text = "\x1f".join(str(p) for p in parts)
    return hashlib.blake2b(text.encode(), digest_size=size).digest()


def h64(*parts: object) -> int:
    """A stable 64-bit integer hash of ``parts`` (independent of PYTHONHASHSEED)."""
    return int.from_bytes(_digest(parts, 8), "big")


def rng_for(*parts: object) -> random.Random:
    """A :class:`random.Random` seeded from a stable hash of ``parts``."""
    return random.Random(h64(*parts))


def uuid_like(*parts: object) -> str:
    """A UUID-shaped (version 4 layout) identifier derived from ``parts``."""
    raw = bytearray(_digest(parts, 16))
    raw[6] = (raw[6] & 0x0F) | 0x40
    raw[8] = (raw[8] & 0x3F) | 0x80
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def short_id(prefix: str, *parts: object) -> str:
    """An opaque short identifier such as ``fld-3f9a0c12d4e5``."""
    return f"{prefix}-{_digest(parts, 6).hex()}"


def timestamp(value: datetime) -> str:
    """Format as the service's zone-less ``YYYY-MM-DDTHH:MM:SS``."""
    return value.strftime(TIMESTAMP_FORMAT)


# ---------------------------------------------------------------- companies

_ALNUM = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LEI_PREFIXES = ("5299", "7245", "2138", "9695", "8156", "3912", "5493", "6354")


def make_lei(r: random.Random) -> str:
    """A 20-character ISO 17442 LEI with valid MOD 97-10 check digits."""
    body = r.choice(_LEI_PREFIXES) + "00" + "".join(r.choice(_ALNUM) for _ in range(12))
    numeric = "".join(str(_ALNUM.index(ch)) for ch in body) + "00"
    return f"{body}{98 - int(numeric) % 97:02d}"


def _digits(r: random.Random, n: int) -> str:
    return "".join(r.choice("0123456789") for _ in range(n))


def make_cin(r: random.Random, iso: str, city: str, year: int) -> str:
    """A corporate identity number in the usual local format of country ``iso``."""
    if iso == "DE":
        return f"HRB {r.randint(10000, 299999)}"
    if iso == "FR":
        d = _digits(r, 9)
        return f"{d[:3]} {d[3:6]} {d[6:]}"
    if iso in ("GB", "NL"):
        return _digits(r, 8)
    if iso == "CH":
        d = _digits(r, 9)
        return f"CHE-{d[:3]}.{d[3:6]}.{d[6:]}"
    if iso == "IT":
        return _digits(r, 11)
    if iso == "ES":
        return r.choice("ABG") + _digits(r, 8)
    if iso == "SE":
        return f"556{_digits(r, 3)}-{_digits(r, 4)}"
    if iso == "PL":
        return "0000" + _digits(r, 6)
    if iso == "US":
        return f"{_digits(r, 2)}-{_digits(r, 7)}"
    if iso == "IN":
        state = vocab.INDIAN_STATE_BY_CITY.get(city, "MH")
        kind = r.choice(("PTC", "PLC"))
        return f"U{_digits(r, 5)}{state}{year}{kind}{_digits(r, 6)}"
    if iso == "SG":
        return f"{year}{_digits(r, 5)}{r.choice('ABCDEKMNRZ')}"
    if iso == "JP":
        return _digits(r, 13)
    if iso == "BR":
        d = _digits(r, 8)
        return f"{d[:2]}.{d[2:5]}.{d[5:]}/0001-{_digits(r, 2)}"
    return _digits(r, 10)


def slug(name: str) -> str:
    """Lower-case alphanumerics of the first two words of ``name`` (for domains)."""
    words = name.split()[:2]
    return "".join(ch for ch in "".join(words).lower() if ch.isalnum()) or "example"


def make_company(seed: int, index: int, drift: bool) -> dict[str, Any]:
    """Company number ``index`` of the world: ``{id, name, country, city, lei, cin}``.

    With ``drift`` the object carries extra properties the spec does not show
    (``website``, ``foundedYear``, ``tags``).
    """
    r = rng_for(seed, "company", index)
    country, iso, cities, forms = r.choice(vocab.COUNTRIES)
    city = r.choice(cities)
    year = r.randint(1952, 2021)
    name = (f"{r.choice(vocab.NAME_ROOTS)} {r.choice(vocab.NAME_TRADES)}"
            f"{r.choice(vocab.NAME_JOINERS)} {r.choice(forms)}")
    company: dict[str, Any] = {
        "id": uuid_like(seed, "company", index),
        "name": name,
        "country": country,
        "city": city,
        "lei": make_lei(r),
        "cin": make_cin(r, iso, city, year),
    }
    if drift:
        company["website"] = f"https://www.{slug(name)}.example"
        company["foundedYear"] = year
        company["tags"] = r.sample(("tier-1", "strategic", "watchlist", "new", "preferred"), 2)
    return company


# ---------------------------------------------------------------- questionnaires

@dataclass(frozen=True)
class FieldSpec:
    """One questionnaire field of a company type's template."""

    id: str
    type: str
    label: str
    options: tuple[dict[str, str], ...] | None  # None: the field has no "options" key
    kind: str | None  # value generator of Input / DatePicker fields


@dataclass(frozen=True)
class Template:
    """The forms and fields of one company type, without answers.

    ``forms`` holds JSON-ready form dicts in order (fields included, no
    ``information``); treat them as read-only. ``fields`` lists every field in
    questionnaire order.
    """

    type_id: str
    forms: tuple[dict[str, Any], ...]
    fields: tuple[FieldSpec, ...]


def _field_dict(spec: FieldSpec, r: random.Random, drift: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"id": spec.id, "type": spec.type, "label": spec.label}
    if spec.options is not None:
        out["options"] = [dict(o) for o in spec.options]
    if drift and spec.type != LABEL:
        out["required"] = r.random() < 0.6
        if spec.type == INPUT:
            out["validation"] = {"maxLength": 255}
    return out


def _spec(seed: int, type_id: str, key: str, ftype: str, label: str,
          choice: tuple[str, ...] | str | None) -> FieldSpec:
    fid = short_id("fld", seed, type_id, key)
    if ftype in CHOICE_TYPES:
        assert isinstance(choice, tuple)
        options = tuple({"id": short_id("opt", fid, i), "value": v} for i, v in enumerate(choice))
        return FieldSpec(fid, ftype, label, options, None)
    kind = choice if isinstance(choice, str) else None
    return FieldSpec(fid, ftype, label, None, kind)


def build_template(seed: int, type_id: str, type_label: str, drift: bool) -> Template:
    """The questionnaire template of ``type_id``: 3-5 themed forms, each opening
    with a ``Label`` heading, then Input, Dropdown and Checkbox questions.

    With ``drift`` the first form also carries a ``DatePicker`` field, a
    ``MultiSelect`` field and a Checkbox whose ``options`` list is empty, and
    forms and fields carry extra unknown properties.
    """
    r = rng_for(seed, "template", type_id)
    themes = r.sample(vocab.THEMES, k=r.randint(3, 5))
    forms: list[dict[str, Any]] = []
    specs: list[FieldSpec] = []
    for fi, (title, questions) in enumerate(themes):
        form_specs = [_spec(seed, type_id, f"{fi}:label", LABEL, title, None)]
        for qi, (ftype, label, choice) in enumerate(questions):
            form_specs.append(_spec(seed, type_id, f"{fi}:{qi}", ftype, label, choice))
        if drift and fi == 0:
            form_specs.append(_spec(seed, type_id, "drift:date", DATE_PICKER,
                                    "Date of last external audit", "date"))
            form_specs.append(_spec(seed, type_id, "drift:multi", MULTI_SELECT,
                                    "Industries served",
                                    ("Automotive", "Retail", "Healthcare", "Energy", "Public")))
            form_specs.append(_spec(seed, type_id, "drift:empty", CHECKBOX,
                                    "Additional certifications", ()))
        form: dict[str, Any] = {
            "id": short_id("frm", seed, type_id, fi),
            "label": f"{type_label}: {title}",
            "fields": [_field_dict(s, r, drift) for s in form_specs],
        }
        if drift:
            form["order"] = fi + 1
            form["description"] = f"Section {fi + 1} of the {type_label.lower()} questionnaire"
        forms.append(form)
        specs.extend(form_specs)
    return Template(type_id, tuple(forms), tuple(specs))


def input_value(r: random.Random, kind: str | None, company: dict[str, Any], today: date) -> str:
    """A plausible free-text answer of the given kind."""
    if kind == "own_name":
        return str(company["name"])
    if kind == "company":
        suffix = r.choice(("AG", "Ltd", "SA", "Inc."))
        return f"{r.choice(vocab.NAME_ROOTS)} {r.choice(vocab.NAME_TRADES)} {suffix}"
    if kind == "person":
        return f"{r.choice(vocab.FIRST_NAMES)} {r.choice(vocab.LAST_NAMES)}"
    if kind == "email":
        first, last = r.choice(vocab.FIRST_NAMES).lower(), r.choice(vocab.LAST_NAMES).lower()
        return f"{first}.{last}@{slug(company['name'])}.example"
    if kind == "url":
        page = r.choice(("compliance", "esg", "trust", "speak-up"))
        return f"https://www.{slug(company['name'])}.example/{page}"
    if kind == "year":
        return str(r.randint(1950, today.year - 1))
    if kind == "date":
        return (today - timedelta(days=r.randint(10, 700))).isoformat()
    if kind == "employees":
        return str(r.choice((r.randint(5, 250), r.randint(250, 5000), r.randint(5000, 90000))))
    if kind == "percent":
        return str(r.randint(0, 100))
    if kind == "money":
        return str(r.randint(2, 9000) * 100_000)
    if kind == "int":
        return str(r.randint(0, 5000))
    return r.choice(("See attached policy", "Not applicable", "Available on request"))


def make_answers(seed: int, company: dict[str, Any], template: Template,
                 today: date) -> dict[str, dict[str, Any]]:
    """The answers ``company`` gave to ``template``: field id -> ``information``.

    About 5% of questionnaires are untouched (no answers); the others answer
    50-100% of their answerable fields. Dropdowns select exactly one option,
    Checkboxes one or more (about 55% of answered Checkboxes select several).
    Labels and fields without options are never answered.
    """
    r = rng_for(seed, "answers", company["id"], template.type_id)
    share = 0.0 if r.random() < 0.05 else 0.5 + 0.5 * r.random()
    answers: dict[str, dict[str, Any]] = {}
    for spec in template.fields:
        if spec.type == LABEL or (spec.options is not None and not spec.options):
            continue
        if r.random() >= share:
            continue
        if spec.type in (INPUT, DATE_PICKER):
            answers[spec.id] = {"value": input_value(r, spec.kind, company, today)}
        elif spec.type == DROPDOWN:
            assert spec.options is not None
            answers[spec.id] = {"options": [dict(r.choice(spec.options))]}
        elif spec.type == CHECKBOX:
            assert spec.options is not None
            k = r.randint(2, min(4, len(spec.options))) if r.random() < 0.55 else 1
            picked = sorted(r.sample(range(len(spec.options)), k))
            answers[spec.id] = {"options": [dict(spec.options[i]) for i in picked]}
        elif spec.type == MULTI_SELECT:
            assert spec.options is not None
            picked = sorted(r.sample(range(len(spec.options)), r.randint(1, 3)))
            answers[spec.id] = {"values": [spec.options[i]["value"] for i in picked]}
    return answers


# ---------------------------------------------------------------- documents

def make_documents(seed: int, company_id: str, type_id: str, today: date, drift: bool,
                   *, at_least: int = 0, force_examples: bool = False) -> list[dict[str, Any]]:
    """The documents ``company_id`` shares under ``type_id`` (0-4 of them, but
    at least ``at_least``).

    Expiration dates relative to ``today``: about 15% expired (1-400 days ago),
    15% expiring within 30 days (1-29 days ahead), the rest 45-1100 days ahead.
    With ``drift`` about 10% have ``expirationDate: null``, 10% lack the key,
    and all carry extra properties; ``force_examples`` then guarantees at least
    two documents, the first with a null and the second with a missing expiry.
    """
    r = rng_for(seed, "documents", company_id, type_id)
    n = max(at_least, r.choices((0, 1, 2, 3, 4), weights=(12, 25, 30, 20, 13))[0])
    if force_examples:
        n = max(n, 2)
    kinds = r.sample(vocab.DOCUMENT_KINDS, n)
    docs: list[dict[str, Any]] = []
    for i, (category, doc_type, stem, ext) in enumerate(kinds):
        bucket = r.random()
        if bucket < 0.15:
            offset = -r.randint(1, 400)
        elif bucket < 0.30:
            offset = r.randint(1, 29)
        else:
            offset = r.randint(45, 1100)
        expires = datetime.combine(today + timedelta(days=offset), datetime.min.time())
        if r.random() < 0.5:
            expires = expires.replace(hour=23, minute=59, second=59)
        issued_day = min(expires.date() - timedelta(days=r.randint(365, 1095)),
                         today - timedelta(days=r.randint(1, 60)))
        issued = datetime.combine(issued_day, datetime.min.time()).replace(
            hour=r.randint(7, 18), minute=r.randint(0, 59), second=r.randint(0, 59))
        doc: dict[str, Any] = {
            "id": uuid_like(seed, "document", company_id, type_id, i),
            "name": f"{stem}_{issued.year}.{ext}",
            "category": category,
            "type": doc_type,
            "issueDate": timestamp(issued),
            "expirationDate": timestamp(expires),
        }
        if drift:
            roll = r.random()
            if (force_examples and i == 0) or (not force_examples and roll < 0.10):
                doc["expirationDate"] = None
            elif (force_examples and i == 1) or (not force_examples and roll < 0.20):
                del doc["expirationDate"]
            doc["sizeBytes"] = r.randint(20_000, 4_000_000)
            doc["mimeType"] = "application/pdf" if ext == "pdf" else "application/octet-stream"
        docs.append(doc)
    return docs


def render_file(doc: dict[str, Any], owner_name: str) -> bytes:
    """Deterministic bytes of a document: a small one-page PDF naming the document.

    The content embeds every property of ``doc``, so it changes whenever the
    document does.
    """
    lines = [f"{owner_name}", f"{doc.get('type', '')} ({doc.get('category', '')})"]
    lines += [f"{k}: {doc[k]}" for k in sorted(doc)]
    fingerprint = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    lines.append(f"fingerprint: {fingerprint}")
    escaped = (ln.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
               for ln in lines)
    text = " T* ".join(f"({ln}) Tj" for ln in escaped)
    stream = f"BT /F1 11 Tf 14 TL 72 740 Td {text} ET".encode("latin-1", "replace")
    return b"".join((
        b"%PDF-1.4\n",
        b"1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n",
        b"2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n",
        (b"3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
         b"/Resources << /Font << /F1 5 0 R >> >> >> endobj\n"),
        b"4 0 obj << /Length %d >> stream\n" % len(stream), stream, b"\nendstream endobj\n",
        b"5 0 obj << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> endobj\n",
        b"trailer << /Root 1 0 R >>\n%%EOF\n",
    ))
