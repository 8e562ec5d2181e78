{#- snake_case(expression): lowercase ASCII snake case of a text (accents folded, every
    run of other characters becomes one '_', no leading or trailing '_'). -#}
{% macro snake_case(expression) -%}
    trim(regexp_replace(lower(strip_accents(coalesce({{ expression }}, ''))), '[^a-z0-9]+', '_', 'g'), '_')
{%- endmacro %}
