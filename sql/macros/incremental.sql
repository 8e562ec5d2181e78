{#-
    The history marts (answer_history, answer_changes, document_history,
    connection_history, changes) are dbt incremental models: each build adds what the
    syncs since the table's last build changed, by delete+insert on the model's unique_key.

    The watermark is the sync, per namespace: the post-hook record_incremental_state
    writes, in the same transaction as the model's rows, the latest successful sync of
    every namespace the build read (from stg_sync_runs), with the fingerprint of the
    model's SQL that diligence passes as var `fingerprints`, into
    staging.incremental_state (one row per relation). The next build reads that row
    (incremental_watermarks) and takes the rows whose boundary (valid_from, valid_to,
    changed_at, ...) is later than their namespace's watermark, all rows of a namespace
    it has none for. A namespace's syncs commit in order, so a sync committed after a
    build of other namespaces (a late sync), after failed syncs or after a gap is still
    new to its own namespace.

    Where the build's tables live and how a build finds the previous one's:
    diligence/analytics/models.py (the build's relation `<name>__build` is the previous
    build's published table, kept as its spare).
-#}

{#- incremental_state_relation(): where record_incremental_state keeps its rows. -#}
{% macro incremental_state_relation() -%}
    "staging"."incremental_state"
{%- endmacro %}

{#- incremental_watermarks(): {namespace: 'timestamp'} of the syncs `this` already
    holds; none when the model builds in full (no table yet, --full-refresh, no state
    recorded for it, or no successful sync when it was), which every predicate below
    reads as "every row". -#}
{% macro incremental_watermarks() -%}
    {%- if not execute or not is_incremental() -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set state = adapter.get_relation(database=this.database, schema='staging',
                                         identifier='incremental_state') -%}
    {%- if state is none -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set found = run_query(
        "select watermarks from " ~ incremental_state_relation()
        ~ " where relation = " ~ sql_string(this.identifier)
    ) -%}
    {%- set watermarks = fromjson(found.rows[0][0]) if found.rows else none -%}
    {{ return(watermarks if watermarks else none) }}
{%- endmacro %}

{#- is_after_watermark(watermarks, columns, namespace='namespace_company_id'): SQL, true
    when one of `columns` (timestamps; NULL counts as not after) is later than the
    watermark of the row's namespace; true for a namespace without one, and for every row
    when `watermarks` is none. -#}
{% macro is_after_watermark(watermarks, columns, namespace='namespace_company_id') -%}
    {%- if watermarks is none -%}
        true
    {%- else -%}
        case {{ namespace }}
        {%- for name, synced_at in watermarks.items() %}
            when {{ sql_string(name) }} then
                {%- for column in columns %}
                coalesce({{ column }} > cast({{ sql_string(synced_at) }} as timestamptz), false)
                {{- ' or' if not loop.last }}
                {%- endfor %}
        {%- endfor %}
            else true
        end
    {%- endif -%}
{%- endmacro %}

{#- rows_after_watermark(relation, watermarks, columns): a SELECT of the rows of
    `relation` that is_after_watermark keeps, in a form DuckDB filters in the scan: a
    UNION ALL of the rows whose first, second, ... column is later than the earliest
    watermark, and of the namespaces without one, each a constant on one column, so the
    scan reads the other columns (answer JSON, forms) only of the rows it keeps. Every
    row when `watermarks` is none. Diligence renders it for the analysts' copy too
    (diligence/analytics/publish.py). -#}
{% macro rows_after_watermark(relation, watermarks, columns) -%}
    {%- if watermarks is none -%}
        select * from {{ relation }}
    {%- else -%}
        {%- set earliest = "cast(" ~ sql_string(watermarks.values() | min) ~ " as timestamptz)" -%}
        {%- set known = [] -%}
        {%- for name in watermarks -%}{%- do known.append(sql_string(name)) -%}{%- endfor -%}
        select * from (
            {%- for column in columns %}
            select * from {{ relation }}
            where {{ column }} > {{ earliest }}
                {%- for earlier in columns[:loop.index0] %}
                and ({{ earlier }} <= {{ earliest }} or {{ earlier }} is null)
                {%- endfor %}
            union all
            {%- endfor %}
            select * from {{ relation }}
            where namespace_company_id not in ({{ known | join(', ') }})
                {%- for column in columns %}
                and ({{ column }} <= {{ earliest }} or {{ column }} is null)
                {%- endfor %}
        )
        where {{ is_after_watermark(watermarks, columns) }}
    {%- endif -%}
{%- endmacro %}

{#- renamed_rows(built, names, watermarks, made): a SELECT of the rows of `built` (the
    model's table before this build) of a company whose name (`names`:
    stg_company_names) changed after the watermark, with that name, but those whose key
    (the model's unique_key) the rows `made` by this build replace. -#}
{% macro renamed_rows(built, names, watermarks, made) -%}
    select {{ built }}.* replace ({{ names }}.company_name as company_name)
    from {{ built }}
    join {{ names }}
        on {{ names }}.namespace_company_id = {{ built }}.namespace_company_id
        and {{ names }}.company_id = {{ built }}.company_id
    anti join {{ made }}
        on {{ same(config.get('unique_key'), made, built) }}
    where {{ is_after_watermark(watermarks, [names ~ '.name_changed_at'],
                                namespace=built ~ '.namespace_company_id') }}
{%- endmacro %}

{#- renamed_and_final(watermarks, made='named'): the last CTEs of a history mart, `final`:
    the rows `made` by this build and, when it extends its table, `renamed`: the rows
    built before of a company whose name changed since, with its name now
    (renamed_rows). -#}
{% macro renamed_and_final(watermarks, made='named') -%}
{%- if watermarks is not none -%}
renamed as (
    {{ renamed_rows('built', 'company_names', watermarks, made) }}
),
{% endif -%}
final as (
    select * from {{ made }}
    {%- if watermarks is not none %}
    union all
    select * from renamed
    {%- endif %}
)
{%- endmacro %}

{#- record_incremental_state(): the post-hook of every incremental model: its row of
    staging.incremental_state, written in the model's transaction (so it is exactly
    what the rows were built from): the latest successful sync per namespace in
    stg_sync_runs, and the fingerprint diligence passed (var `fingerprints`; NULL for a
    run of plain dbt, which the next diligence build then builds in full). -#}
{% macro record_incremental_state() -%}
    {%- set fingerprint = var('fingerprints', {}).get(model.name) -%}
    create table if not exists {{ incremental_state_relation() }} (
        relation varchar, fingerprint varchar, watermarks varchar, built_at timestamptz
    );
    delete from {{ incremental_state_relation() }} where relation = {{ sql_string(this.identifier) }};
    insert into {{ incremental_state_relation() }}
    select
        {{ sql_string(this.identifier) }},
        {{ sql_string(fingerprint) if fingerprint else 'null' }},
        -- UTC text of one width: the least is the earliest (rows_after_watermark)
        coalesce(cast(json_group_object(
            namespace_company_id,
            strftime(timezone('UTC', synced_at), '%Y-%m-%d %H:%M:%S.%f') || '+00'
        ) as varchar), '{}'),
        now()
    from (
        select namespace_company_id, max(synced_at) as synced_at
        from {{ ref('stg_sync_runs') }}
        where status = 'success'
        group by namespace_company_id
    );
{%- endmacro %}
