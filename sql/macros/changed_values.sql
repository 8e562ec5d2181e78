{#-
    changed_values(attributes, side): of a list of {'name', 'old', 'new'} structs, those
    whose old and new differ, as a JSON object text of name -> the `side` value ('old' or
    'new'), e.g. '{"city":"Lyon"}'. NULL when nothing differs.
-#}
{% macro changed_values(attributes, side) -%}
    nullif(
        cast(to_json(map_from_entries(list_transform(
            list_filter({{ attributes }}, lambda a: a.old is distinct from a.new),
            lambda a: {'k': a.name, 'v': a.{{ side }}}
        ))) as varchar),
        '{}'
    )
{%- endmacro %}

{#-
    attributes(columns, old, new): the list of {'name', 'old', 'new'} structs that
    changed_values reads, one per entry name -> column of `columns`, the column's value in
    the relations `old` and `new`.
-#}
{% macro attributes(columns, old, new) -%}
    [
        {%- for name, column in columns.items() %}
        {'name': '{{ name }}', 'old': {{ old }}.{{ column }}, 'new': {{ new }}.{{ column }}}{{ ',' if not loop.last }}
        {%- endfor %}
    ]
{%- endmacro %}
