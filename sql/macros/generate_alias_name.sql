{#-
    On diligence's own build (target `build`) every model of `analytics` (a table, or a
    view such as freshness) is built beside its published relation, as `<name>__build` in
    the same schema; once the whole build has succeeded diligence swaps them in, in one
    transaction (diligence/analytics/models.py). Staging's views and every other target
    keep dbt's names.
-#}
{% macro generate_alias_name(custom_alias_name=none, node=none) -%}
    {%- set name = (custom_alias_name or node.name) | trim -%}
    {%- if target.name == 'build' and node.resource_type == 'model'
          and node.config.schema != 'staging' -%}
        {{ name ~ '__build' }}
    {%- else -%}
        {{ name }}
    {%- endif -%}
{%- endmacro %}
