"""Synthetic raw layer at scale, and a timing of build_models on it.

Run: .venv/bin/python -m tests.models.synthetic [questionnaires] [fields_per_questionnaire]
"""

from __future__ import annotations

import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import duckdb

from diligence.models import ModelsResult, build_models

from .rawdb import SYNCED_AT, create_raw

FIELD_TYPES = ("Label", "Input", "Dropdown", "Checkbox", "DatePicker")


def generate_raw(
    path: Path,
    questionnaires: int = 10_000,
    fields_per_questionnaire: int = 30,
    namespaces: int = 2,
    company_types: int = 5,
) -> Path:
    """Fill a new raw layer: companies, connections, questionnaires with mixed field types
    (Label, Input, Dropdown, Checkbox with several selections, an unknown type), with
    about one in five fields unanswered, and three documents per questionnaire. Built
    set-wise in DuckDB, so generating 10,000 questionnaires takes a second or two."""
    create_raw(path)
    companies_per_namespace = max(1, questionnaires // (namespaces * company_types))
    params = {
        "namespaces": namespaces,
        "companies": companies_per_namespace,
        "types": company_types,
        "fields": fields_per_questionnaire,
        "synced_at": SYNCED_AT,
        "max_questionnaires": questionnaires,
    }
    with duckdb.connect(str(path)) as con:
        for name, value in params.items():
            con.execute(f"set variable {name} = ?", [value])
        con.execute(
            """
            insert into raw.companies
                (namespace_company_id, company_id, name, country, city, is_namespace_company,
                 synced_at)
            select 'ns-' || n, 'co-' || n || '-' || c, 'Company ' || n || '-' || c, 'NO', 'Oslo',
                false, getvariable('synced_at')
            from range(getvariable('namespaces')) ns(n), range(getvariable('companies')) cs(c)
            """
        )
        con.execute(
            """
            insert into raw.connections
                (namespace_company_id, company_id, name, country, given_company_type_ids,
                 received_company_type_ids, has_detail, synced_at)
            select namespace_company_id, company_id, name, country, '["t0","t1"]', '["t0"]',
                true, synced_at
            from raw.companies
            """
        )
        con.execute(
            """
            insert into raw.questionnaires
                (namespace_company_id, company_id, company_type_id, forms_json, content_hash,
                 synced_at, _dlt_valid_from, _dlt_valid_to, _dlt_id)
            with questionnaires as (
                select namespace_company_id, company_id, 't' || t as company_type_id
                from raw.companies, range(getvariable('types')) ts(t)
                limit getvariable('max_questionnaires')
            ),
            fields as (
                select q.*, f,
                    ['Label', 'Input', 'Dropdown', 'Checkbox', 'DatePicker'][f % 5 + 1] as type,
                    hash(q.company_id, q.company_type_id, f) % 5 = 0 as is_unanswered
                from questionnaires q, range(getvariable('fields')) fs(f)
            ),
            field_json as (
                select namespace_company_id, company_id, company_type_id, f // 10 as form_no,
                    json_object(
                        'id', 'fld-' || company_type_id || '-' || f,
                        'type', type,
                        'label', 'Question ' || f,
                        'options', case when type in ('Dropdown', 'Checkbox') then json(
                            '[{"id":"a","value":"Yes"},{"id":"b","value":"No"},'
                            || '{"id":"c","value":"Maybe"}]') end,
                        'information', case
                            when type = 'Label' or is_unanswered then null
                            when type = 'Input' then json_object('value', 'answer ' || f)
                            when type = 'Dropdown' then json('{"options":[{"id":"a","value":"Yes"}]}')
                            when type = 'Checkbox' then json(
                                '{"options":[{"id":"a","value":"Yes"},{"id":"c","value":"Maybe"}]}')
                            else json_object('value', '2026-01-01')
                        end
                    ) as field
                from fields
            ),
            forms as (
                select namespace_company_id, company_id, company_type_id, form_no,
                    json_object('id', 'form-' || form_no, 'label', 'Form ' || form_no,
                        'fields', json_group_array(field)) as form
                from field_json
                group by namespace_company_id, company_id, company_type_id, form_no
            )
            select namespace_company_id, company_id, company_type_id,
                cast(to_json(list(form order by form_no)) as varchar), 'hash',
                getvariable('synced_at'), getvariable('synced_at'), null, uuid()::varchar
            from forms
            group by namespace_company_id, company_id, company_type_id
            """
        )
        con.execute(
            """
            insert into raw.documents
                (namespace_company_id, company_id, company_type_id, document_id, name, category,
                 type, issue_date, expiration_date, document_json, content_hash, synced_at,
                 _dlt_valid_from, _dlt_valid_to)
            select namespace_company_id, company_id, company_type_id,
                'doc-' || company_id || '-' || company_type_id || '-' || d, 'file.pdf', 'Legal',
                'Certificate', '2025-01-01T00:00:00',
                strftime(timestamp '2026-01-01' + to_days(cast(hash(company_id, d) % 400 as integer)),
                    '%Y-%m-%dT%H:%M:%S'),
                '{}', 'hash', getvariable('synced_at'), getvariable('synced_at'), null
            from raw.questionnaires, range(3) ds(d)
            """
        )
    return path


def time_build(
    questionnaires: int = 10_000, fields_per_questionnaire: int = 30
) -> tuple[float, ModelsResult]:
    """Generate a raw layer in a temporary directory, build the models, return the
    build's wall time in seconds and its result."""
    with tempfile.TemporaryDirectory() as tmp:
        warehouse = generate_raw(
            Path(tmp) / "scale.duckdb", questionnaires, fields_per_questionnaire
        )
        started = time.perf_counter()
        result = build_models(warehouse, as_of=SYNCED_AT + timedelta(days=1))
        return time.perf_counter() - started, result


def main(argv: list[str]) -> None:
    questionnaires = int(argv[0]) if argv else 10_000
    fields = int(argv[1]) if len(argv) > 1 else 30
    seconds, result = time_build(questionnaires, fields)
    print(f"build_models: {seconds:.2f} s for {questionnaires} questionnaires x {fields} fields")
    for model, model_seconds in sorted(result.timings.items(), key=lambda kv: -kv[1])[:8]:
        print(f"  {model:45} {model_seconds:6.3f} s")
    for table, rows in result.row_counts.items():
        print(f"  {table:45} {rows:>9} rows")


if __name__ == "__main__":
    main(sys.argv[1:])
