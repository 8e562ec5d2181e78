{#-
    raw_source(table_name): the raw table `raw.<table_name>` as a subquery with exactly
    the columns declared for it in models/staging/_sources.yml, cast to their declared
    types. dlt creates a column only once it has seen a non-null value, and a namespace
    may have no rows of a table at all, so a declared column missing from the raw table
    becomes a typed NULL and a missing raw table an empty typed relation: staging always
    builds. The dependency on the source is recorded as with source().

    Whether the raw table exists is asked of the database (list_relations_without_caching),
    not of dbt's relation cache: the cache marks a schema as listed once the first of its
    relations is added, so a staging model compiled in another thread meanwhile would find
    only part of `raw` and build empty (a data check then fails with nothing wrong).

    With var `as_of` given (and var `versions_at_as_of`, true by default), the table reads
    as it stood at that moment: only the rows loaded by a sync at or before it (by
    _dlt_valid_from, else synced_at, started_at, finished_at), and a version retired after
    it (_dlt_valid_to later) still current. Every model downstream then shows the
    warehouse as the last sync before `as_of` left it. A table whose source says `meta:
    {history: false}` (replaced every sync) reads as it is. diligence's own builds pass
    `versions_at_as_of: false` unless asked for a past register (`--as-of`).
-#}
{% macro raw_source(table_name) -%}
    {%- set relation = source('raw', table_name) -%}
    {%- if not execute -%}
        {{ relation }}
    {%- else -%}
        {%- set listed = [] -%}
        {%- for row in list_relations_without_caching(relation.without_identifier()) -%}
            {%- do listed.append(row['name'] | lower) -%}
        {%- endfor -%}
        {%- set existing = relation.include(database=True) if (relation.identifier | lower) in listed else none -%}
        {%- set present = [] -%}
        {%- if existing is not none -%}
            {%- for column in adapter.get_columns_in_relation(existing) -%}
                {%- do present.append(column.name | lower) -%}
            {%- endfor -%}
        {%- endif -%}
        {%- set source_node = graph.sources['source.' ~ project_name ~ '.raw.' ~ table_name] -%}
        {%- set declared = source_node.columns -%}
        {%- set keeps_history = source_node.meta.get('history', true) -%}
        {%- set as_of_moment = register_as_of() if keeps_history else none -%}
        {%- if as_of_moment is not none %}
        (
            select *
            {%- if '_dlt_valid_to' in declared %}
                replace (case when _dlt_valid_to > {{ as_of_moment }} then null else _dlt_valid_to end
                    as _dlt_valid_to)
            {%- endif %}
            from
        {%- endif %}
        (
            select
            {%- for name, column in declared.items() %}
                {% if name in present -%}
                    cast({{ adapter.quote(name) }} as {{ column.data_type }})
                {%- else -%}
                    cast(null as {{ column.data_type }})
                {%- endif %} as {{ name }}{{ "," if not loop.last }}
            {%- endfor %}
            {% if existing is not none -%}
                from {{ existing.include(database=False) }}
            {%- else -%}
                where false
            {%- endif %}
        )
        {%- if as_of_moment is not none %}
            where {{ as_of_moment }} >= coalesce(
                {%- for name in ['_dlt_valid_from', 'synced_at', 'started_at', 'finished_at'] if name in declared -%}
                    {{ name }}{{ ", " if not loop.last }}
                {%- endfor -%})
        )
        {%- endif %}
    {%- endif -%}
{%- endmacro %}
