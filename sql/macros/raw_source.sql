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
-#}
{% macro raw_source(table_name) -%}
    {%- set relation = source('raw', table_name) -%}
    {%- if not execute -%}
        {{ relation }}
    {%- else -%}
        {%- set declared = graph.sources['source.' ~ project_name ~ '.raw.' ~ table_name].columns -%}
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
    {%- endif -%}
{%- endmacro %}
