{#-
    Staging views go to schema `staging`; marts and analysts' custom models to the
    target's schema (`analytics`, or the build schema that diligence swaps into
    `analytics` once the build is complete).
-#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {%- if custom_schema_name is none -%}
        {{ target.schema }}
    {%- else -%}
        {{ custom_schema_name | trim }}
    {%- endif -%}
{%- endmacro %}
