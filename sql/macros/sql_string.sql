{#- sql_string(value): a text as a SQL string literal, quotes doubled. -#}
{% macro sql_string(value) -%}
    '{{ value | string | replace("'", "''") }}'
{%- endmacro %}
