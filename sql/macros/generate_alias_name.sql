{#-
    On diligence's own build (target `build`) every table model is built beside its
    published table, as `<name>__build` in the same schema; once the whole build has
    succeeded diligence renames them over the published tables in one transaction
    (diligence/models.py). Views (staging) and every other target keep dbt's names.
-#}
{% macro generate_alias_name(custom_alias_name=none, node=none) -%}
    {%- set name = (custom_alias_name or node.name) | trim -%}
    {%- if target.name == 'build' and node.resource_type == 'model'
          and node.config.materialized != 'view' -%}
        {{ name ~ '__build' }}
    {%- else -%}
        {{ name }}
    {%- endif -%}
{%- endmacro %}
