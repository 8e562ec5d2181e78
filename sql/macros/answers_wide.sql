{#- wide_column_list(columns_relation): [(column_position, column_name), ...] of
    answers_wide_columns, in order; empty while dbt parses. Names are checked to be
    plain identifiers. -#}
{% macro wide_column_list(columns_relation) -%}
    {%- set listed = [] -%}
    {%- if execute -%}
        {%- set result = run_query(
            "select column_position, column_name from " ~ columns_relation
            ~ " order by column_position"
        ) -%}
        {%- for row in result.rows -%}
            {%- if not modules.re.fullmatch('[a-z_][a-z0-9_]*', row[1]) -%}
                {{ exceptions.raise_compiler_error("unsafe answers_wide column name " ~ row[1]) }}
            {%- endif -%}
            {%- do listed.append((row[0] | int, row[1])) -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return(listed) }}
{%- endmacro %}

{#- comment_wide_columns(relation, columns_relation): the statements that describe each
    field column of answers_wide by the field it holds (a post-hook; the key columns are
    described in YAML). -#}
{% macro comment_wide_columns(relation, columns_relation) -%}
    {%- if execute -%}
        {%- set result = run_query(
            "select column_name, field_id, field_label from " ~ columns_relation
        ) -%}
        {%- for row in result.rows -%}
            comment on column {{ relation }}.{{ adapter.quote(row[0]) }} is
            {{ sql_string("answer_text of field " ~ row[1] ~ " (" ~ (row[2] or "no label") ~ ")") }};
        {% endfor -%}
    {%- endif -%}
{%- endmacro %}
