"""Synthetic raw layer at scale, and a timing of build_models on it.

Run: .venv/bin/python -m tests.models.synthetic [questionnaires] [fields_per_questionnaire]
or   .venv/bin/python -m tests.models.synthetic large   (the sandbox's `large` size with
     several syncs of history: see PROFILES)

Churn: with `churn` > 0, every sync after the second gives that share of the
questionnaires a new version with one revised answer (`_add_churn`); `append_sync` adds
one more such sync to a raw layer, as the next daily sync would (`python -m
benchmarks.growth`).
"""

from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import duckdb

from diligence.analytics.models import ModelsResult, build_models

from .rawdb import SYNCED_AT, create_raw

FIELD_TYPES = ("Label", "Input", "Dropdown", "Checkbox", "DatePicker")


@dataclass(frozen=True)
class Profile:
    questionnaires: int
    fields_per_questionnaire: int
    namespaces: int
    company_types: int
    syncs: int


# `large` matches the sandbox's large world (3 namespaces of 2,000 connections, about
# 11,500 questionnaires), with five syncs of history: one in ten questionnaires and
# documents changed once, one connection in a hundred removed and one in a hundred
# withdrawing and restoring its reading rights.
PROFILES: dict[str, Profile] = {
    "small": Profile(2_000, 10, 2, 2, 3),
    "large": Profile(11_500, 30, 3, 2, 5),
}


def generate_raw(
    path: Path,
    questionnaires: int = 10_000,
    fields_per_questionnaire: int = 30,
    namespaces: int = 2,
    company_types: int = 5,
    syncs: int = 1,
    churn: float = 0.0,
) -> Path:
    """Fill a new raw layer: companies, connections, questionnaires with mixed field types
    (Label, Input, Dropdown, Checkbox with several selections, an unknown type), with
    about one in five fields unanswered, and three documents per questionnaire. Built
    set-wise in DuckDB, so generating 10,000 questionnaires takes a second or two.

    With `syncs` > 1 the raw layer holds that many successful syncs per namespace, one a
    day ending at SYNCED_AT, and history (see `_add_history`); with `churn` > 0 also the
    revisions of every sync after the second (see `_add_churn`)."""
    create_raw(path)
    companies_per_namespace = max(1, questionnaires // (namespaces * company_types))
    params = {
        "namespaces": namespaces,
        "companies": companies_per_namespace,
        "types": company_types,
        "fields": fields_per_questionnaire,
        "synced_at": SYNCED_AT,
        "max_questionnaires": questionnaires,
        "first_synced_at": SYNCED_AT - timedelta(days=syncs - 1),
    }
    with duckdb.connect(str(path)) as con:
        for name, value in params.items():
            con.execute(f"set variable {name} = ?", [value])
        con.execute(
            """
            insert into raw.companies
                (namespace_company_id, company_id, name, country, city, is_namespace_company,
                 content_hash, synced_at, _dlt_valid_from, _dlt_valid_to)
            select 'ns-' || n,
                -- one company in ten is shared by every namespace
                case when c % 10 = 0 then 'co-shared-' || c else 'co-' || n || '-' || c end,
                'Company ' || c, 'NO', 'Oslo', false, 'hash',
                getvariable('first_synced_at'), getvariable('first_synced_at'), null
            from range(getvariable('namespaces')) ns(n), range(getvariable('companies')) cs(c)
            """
        )
        con.execute(
            """
            insert into raw.connections
                (namespace_company_id, company_id, name, country, given_company_type_ids,
                 received_company_type_ids, has_detail, content_hash, synced_at,
                 _dlt_valid_from, _dlt_valid_to)
            select namespace_company_id, company_id, name, country, '["t0","t1"]',
                (select to_json(list('t' || t)) from range(getvariable('types')) ts(t)),
                true, 'hash', synced_at, _dlt_valid_from, null
            from raw.companies
            """
        )
        con.execute(
            """
            insert into raw.companies
                (namespace_company_id, company_id, name, country, city, is_namespace_company,
                 content_hash, synced_at, _dlt_valid_from, _dlt_valid_to)
            select 'ns-' || n, 'ns-' || n, 'Namespace ' || n, 'NO', 'Oslo', true, 'hash',
                getvariable('first_synced_at'), getvariable('first_synced_at'), null
            from range(getvariable('namespaces')) ns(n)
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
                where not is_namespace_company
                order by all
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
                getvariable('first_synced_at'), getvariable('first_synced_at'), null,
                uuid()::varchar
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
                '{}', 'hash', getvariable('first_synced_at'), getvariable('first_synced_at'),
                null
            from raw.questionnaires, range(3) ds(d)
            """
        )
        runs = [SYNCED_AT - timedelta(days=syncs - 1 - i) for i in range(syncs)]
        con.execute(
            """
            insert into raw.sync_runs
                (sync_id, namespace_company_id, started_at, finished_at, status, requests,
                 rows_loaded, issues, synced_at)
            select 's' || epoch(r.run_at), 'ns-' || n, r.run_at, r.run_at, 'success', 0, 0, 0, r.run_at
            from range(getvariable('namespaces')) ns(n), unnest(?::timestamptz[]) r(run_at)
            """,
            [runs],
        )
        if syncs > 1:
            _add_history(con, runs)
        if churn > 0 and syncs > 2:
            _add_churn(con, runs[2:], churn)
    return path


def append_sync(path: Path, churn: float = 0.02) -> datetime:
    """Add the next daily sync to the raw layer at `path` (made by `generate_raw`): a
    successful run of every namespace a day after the last one, at which `churn` of the
    current questionnaires get a new version with one revised answer. Returns the new
    sync's synced_at."""
    with duckdb.connect(str(path)) as con:
        return append_sync_to(con, churn)


def append_sync_to(con: duckdb.DuckDBPyConnection, churn: float = 0.02) -> datetime:
    """`append_sync` on the warehouse `con` has selected (a file, or a lake)."""
    last = con.execute("select max(synced_at) from raw.sync_runs").fetchone()[0]  # type: ignore[index]
    run_at = last + timedelta(days=1)
    con.execute(
        """
        insert into raw.sync_runs
            (sync_id, namespace_company_id, started_at, finished_at, status, requests,
             rows_loaded, issues, synced_at)
        select distinct 's' || epoch(?::timestamptz), namespace_company_id, ?::timestamptz,
            ?::timestamptz, 'success', 0, 0, 0, ?::timestamptz
        from raw.sync_runs
        """,
        [run_at] * 4,
    )
    _add_churn(con, [run_at], churn)
    return run_at


#: The first answered Input field of a questionnaire as generated (`"answer 7"`), or as
#: revised by a sync (`"answer 7 (rev 2026-01-09)"`): the answer `_add_churn` revises.
_REVISED_ANSWER = r'"answer (\d+)( \(rev [^)]*\))?"'


def _add_churn(con: duckdb.DuckDBPyConnection, runs: list[datetime], churn: float) -> None:
    """At each sync of `runs` (in order), a share `churn` of the questionnaires current
    before the first of them, chosen anew per sync, get a new version: the current one
    with its first answered Input field revised (so each version differs from the one
    before in exactly one answer), valid from that sync until the next revision.

    Set-wise: the versions of every sync of `runs` are made in one statement (a few
    seconds for 1,000 syncs of `large`)."""
    con.execute("set variable churn_every = ?", [max(1, round(1 / churn))])
    con.execute(
        """
        create or replace temporary table churn_runs as
        select * from unnest(?::timestamptz[]) with ordinality as r(run_at, run_index)
        """,
        [runs],
    )
    con.execute(
        f"""
        create or replace temporary table churned as
        with eligible as (
            select namespace_company_id, company_id, company_type_id, forms_json
            from raw.questionnaires
            where _dlt_valid_to is null
                and _dlt_valid_from < (select min(run_at) from churn_runs)
        ),
        events as (
            select eligible.*, churn_runs.run_at
            from eligible, churn_runs
            where hash(namespace_company_id, company_id, company_type_id, run_at)
                % getvariable('churn_every') = 0
        )
        select
            namespace_company_id, company_id, company_type_id,
            regexp_replace(
                forms_json, '{_REVISED_ANSWER}',
                '"answer \\1 (rev ' || strftime(run_at, '%Y-%m-%d') || ')"'
            ) as forms_json,
            run_at as valid_from,
            lead(run_at) over (
                partition by namespace_company_id, company_id, company_type_id order by run_at
            ) as valid_to
        from events
        """
    )
    con.execute(
        """
        update raw.questionnaires set _dlt_valid_to = first_revision.valid_from
        from (
            select namespace_company_id, company_id, company_type_id, min(valid_from) as valid_from
            from churned group by all
        ) as first_revision
        where questionnaires._dlt_valid_to is null
            and first_revision.namespace_company_id = questionnaires.namespace_company_id
            and first_revision.company_id = questionnaires.company_id
            and first_revision.company_type_id = questionnaires.company_type_id
        """
    )
    con.execute(
        """
        insert into raw.questionnaires
            (namespace_company_id, company_id, company_type_id, forms_json, content_hash,
             synced_at, _dlt_valid_from, _dlt_valid_to, _dlt_id)
        select namespace_company_id, company_id, company_type_id, forms_json, md5(forms_json),
            valid_from, valid_from, valid_to, uuid()::varchar
        from churned
        """
    )


def _add_history(con: duckdb.DuckDBPyConnection, runs: list[datetime]) -> None:
    """History over the syncs `runs` (at least two):

    - one questionnaire in ten, and one document in ten, changed at the second sync (an
      older version is kept, the current one starts then);
    - one connection in a hundred was removed at the last sync: its connection, company
      details, questionnaires and documents end then;
    - one connection in a hundred withdrew its reading rights at the second sync (a 403
      per company type in sync_issues; its questionnaires and documents end) and gave
      them back at the last sync (new versions start then).
    """
    first, second, last = runs[0], runs[1], runs[-1]
    for name, value in (("first", first), ("second", second), ("last", last)):
        con.execute(f"set variable {name}_run = ?::timestamptz", [value])
    con.execute(
        """
        create temporary table withdrawn as
        select namespace_company_id, company_id from raw.connections
        where hash(namespace_company_id, company_id, 'withdrawn') % 100 = 0
        """
    )
    con.execute(
        """
        create temporary table removed as
        select namespace_company_id, company_id from raw.connections
        where hash(namespace_company_id, company_id, 'removed') % 100 = 0
            and (namespace_company_id, company_id)
                not in (select (namespace_company_id, company_id) from withdrawn)
        """
    )
    con.execute(
        """
        create temporary table changed as
        select namespace_company_id, company_id, company_type_id
        from raw.questionnaires
        where hash(namespace_company_id, company_id, company_type_id) % 10 = 0
            and (namespace_company_id, company_id)
                not in (select (namespace_company_id, company_id) from withdrawn)
        """
    )
    con.execute(
        """
        insert into raw.questionnaires
            (namespace_company_id, company_id, company_type_id, forms_json, content_hash,
             synced_at, _dlt_valid_from, _dlt_valid_to, _dlt_id)
        select namespace_company_id, company_id, company_type_id,
            replace(forms_json, '"answer ', '"earlier answer '), 'old-hash',
            getvariable('first_run'), getvariable('first_run'), getvariable('second_run'),
            uuid()::varchar
        from raw.questionnaires
        join changed using (namespace_company_id, company_id, company_type_id)
        """
    )
    con.execute(
        """
        update raw.questionnaires set _dlt_valid_from = getvariable('second_run'),
            synced_at = getvariable('second_run')
        from changed
        where questionnaires.content_hash = 'hash'
            and changed.namespace_company_id = questionnaires.namespace_company_id
            and changed.company_id = questionnaires.company_id
            and changed.company_type_id = questionnaires.company_type_id
        """
    )
    con.execute(
        """
        insert into raw.documents
            (namespace_company_id, company_id, company_type_id, document_id, name, category,
             type, issue_date, expiration_date, document_json, content_hash, synced_at,
             _dlt_valid_from, _dlt_valid_to)
        select namespace_company_id, company_id, company_type_id, document_id, 'old.pdf',
            category, type, issue_date, expiration_date, document_json, 'old-hash',
            getvariable('first_run'), getvariable('first_run'), getvariable('second_run')
        from raw.documents
        where hash(document_id) % 10 = 0
            and (namespace_company_id, company_id)
                not in (select (namespace_company_id, company_id) from withdrawn)
        """
    )
    con.execute(
        """
        update raw.documents set _dlt_valid_from = getvariable('second_run'),
            synced_at = getvariable('second_run')
        where hash(document_id) % 10 = 0 and content_hash = 'hash'
            and (namespace_company_id, company_id)
                not in (select (namespace_company_id, company_id) from withdrawn)
        """
    )
    # removed at the last sync
    for table in ("connections", "companies", "questionnaires", "documents"):
        con.execute(
            f"""
            update raw.{table} set _dlt_valid_to = getvariable('last_run')
            from removed
            where {table}._dlt_valid_to is null
                and removed.namespace_company_id = {table}.namespace_company_id
                and removed.company_id = {table}.company_id
            """
        )
    # reading rights withdrawn at the second sync, restored at the last one
    con.execute(
        """
        insert into raw.sync_issues
            (sync_id, namespace_company_id, endpoint, company_id, company_type_id,
             http_status, message, synced_at)
        select distinct 's' || epoch(getvariable('second_run')), q.namespace_company_id,
            'questionnaire', q.company_id, q.company_type_id, 403, 'Forbidden',
            getvariable('second_run')
        from raw.questionnaires q
        join withdrawn using (namespace_company_id, company_id)
        """
    )
    for table in ("questionnaires", "documents"):
        columns = [
            row[0]
            for row in con.execute(
                "select column_name from information_schema.columns "
                "where table_schema = 'raw' and table_name = ? order by ordinal_position",
                [table],
            ).fetchall()
        ]
        restored = ", ".join(
            {
                "synced_at": "getvariable('last_run')",
                "_dlt_valid_from": "getvariable('last_run')",
                "_dlt_valid_to": "null",
                "_dlt_id": "uuid()::varchar",
            }.get(column, f"t.{column}")
            for column in columns
        )
        con.execute(
            f"""
            insert into raw.{table} ({", ".join(columns)})
            select {restored}
            from raw.{table} t
            join withdrawn using (namespace_company_id, company_id)
            where t._dlt_valid_to is null
            """
        )
        con.execute(
            f"""
            update raw.{table} set _dlt_valid_to = getvariable('second_run')
            from withdrawn
            where {table}._dlt_valid_to is null
                and {table}._dlt_valid_from < getvariable('last_run')
                and withdrawn.namespace_company_id = {table}.namespace_company_id
                and withdrawn.company_id = {table}.company_id
            """
        )
    con.execute(
        """
        insert into raw.connections
            (namespace_company_id, company_id, name, country, given_company_type_ids,
             received_company_type_ids, has_detail, content_hash, synced_at,
             _dlt_valid_from, _dlt_valid_to)
        select c.namespace_company_id, c.company_id, c.name, c.country,
            c.given_company_type_ids, v.received, true, v.hash, v.valid_from, v.valid_from,
            v.valid_to
        from raw.connections c
        join withdrawn using (namespace_company_id, company_id),
        (
            select '[]' as received, 'withdrawn' as hash,
                getvariable('second_run') as valid_from, getvariable('last_run') as valid_to
            union all
            select null, 'restored', getvariable('last_run'), null
        ) v
        where c._dlt_valid_to is null
        """
    )
    con.execute(
        """
        update raw.connections set
            received_company_type_ids = coalesce(
                received_company_type_ids,
                (select received_company_type_ids from raw.connections o
                 where o.namespace_company_id = connections.namespace_company_id
                    and o.company_id = connections.company_id and o.content_hash = 'hash')
            )
        where content_hash = 'restored'
        """
    )
    con.execute(
        """
        update raw.connections set _dlt_valid_to = getvariable('second_run')
        from withdrawn
        where connections.content_hash = 'hash' and connections._dlt_valid_to is null
            and withdrawn.namespace_company_id = connections.namespace_company_id
            and withdrawn.company_id = connections.company_id
        """
    )


def time_build(
    questionnaires: int = 10_000,
    fields_per_questionnaire: int = 30,
    profile: Profile | None = None,
) -> tuple[float, ModelsResult]:
    """Generate a raw layer in a temporary directory (from `profile` when given), build
    the models, return the build's wall time in seconds and its result."""
    with tempfile.TemporaryDirectory() as tmp:
        if profile is None:
            warehouse = generate_raw(
                Path(tmp) / "scale.duckdb", questionnaires, fields_per_questionnaire
            )
        else:
            warehouse = generate_raw(
                Path(tmp) / "scale.duckdb",
                profile.questionnaires,
                profile.fields_per_questionnaire,
                profile.namespaces,
                profile.company_types,
                profile.syncs,
            )
        started = time.perf_counter()
        result = build_models(warehouse, as_of=SYNCED_AT + timedelta(days=1))
        return time.perf_counter() - started, result


def main(argv: list[str]) -> None:
    if argv and argv[0] in PROFILES:
        profile = PROFILES[argv[0]]
        seconds, result = time_build(profile=profile)
        print(f"build_models: {seconds:.2f} s for profile {argv[0]}: {profile}")
    else:
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
