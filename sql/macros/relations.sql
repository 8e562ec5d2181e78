{#-
    ref() and source() without the catalog: compiled SQL says "analytics"."answers", not
    "warehouse"."analytics"."answers". dbt attaches the warehouse as catalog `warehouse`;
    a view stored with that name in it would not resolve once the file is opened under
    another name (an analyst's ATTACH, the published copy). Unqualified, a view resolves
    in its own catalog.
-#}
{% macro ref() -%}
    {{ return(builtins.ref(*varargs, **kwargs).include(database=False)) }}
{%- endmacro %}

{% macro source(source_name, table_name) -%}
    {{ return(builtins.source(source_name, table_name).include(database=False)) }}
{%- endmacro %}
