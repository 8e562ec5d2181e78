{#-
    The pieces of the change feed's comparisons of a thing's version before a sync (the
    `ends` side) and after it (the `starts` side).

    starts_and_ends(prefix, versions): two CTEs, `<prefix>_starts` and `<prefix>_ends`,
    the versions of `versions` that started, and that ended, at a sync of the CTE `syncs`
    (see versions_at_syncs).
-#}
{% macro starts_and_ends(prefix, versions) -%}
{{ prefix }}_starts as (
    {{ versions_at_syncs(versions, 'valid_from') }}
),

{{ prefix }}_ends as (
    {{ versions_at_syncs(versions, 'valid_to') }}
)
{%- endmacro %}

{#-
    replaced_at_syncs(versions, keys): a FROM clause of the versions of `versions` (`new`)
    that started at a sync of the CTE `syncs` (`syncs`) and replaced the version of the
    same `keys` that ended then (`old`).
-#}
{% macro replaced_at_syncs(versions, keys) -%}
    from {{ versions }} as new
    join syncs
        on syncs.namespace_company_id = new.namespace_company_id
        and syncs.synced_at = new.valid_from
    join {{ versions }} as old
        on {{ same(keys, 'old', 'new') }}
        and old.valid_to = new.valid_from
{%- endmacro %}

{#-
    either_side(columns, new='starts', old='ends'): select items, each of `columns` from
    whichever side of a full outer join has it (`coalesce(new.c, old.c) as c`).
-#}
{% macro either_side(columns, new='starts', old='ends') -%}
    {%- for column in columns %}
        coalesce({{ new }}.{{ column }}, {{ old }}.{{ column }}) as {{ column }}{{ ',' if not loop.last }}
    {%- endfor %}
{%- endmacro %}

{#-
    same(columns, left, right): a join condition, `left` and `right` equal on every one of
    `columns`.
-#}
{% macro same(columns, left, right) -%}
    {%- for column in columns %}
        {{ 'and ' if not loop.first }}{{ left }}.{{ column }} = {{ right }}.{{ column }}
    {%- endfor %}
{%- endmacro %}

{#-
    presence_change(prefix, was_there, is_there, old_label, new_label, attributes): the
    change_kind, old_value and new_value of a thing that may be added (`<prefix>_added`,
    new_value: its `new_label`), removed (`<prefix>_removed`, old_value: its `old_label`)
    or changed (`<prefix>_changed`, JSON of the changed `attributes` before and after,
    see changed_values).
-#}
{% macro presence_change(prefix, was_there, is_there, old_label, new_label, attributes) -%}
        case
            when not {{ was_there }} then '{{ prefix }}_added'
            when not {{ is_there }} then '{{ prefix }}_removed'
            else '{{ prefix }}_changed'
        end as change_kind,
        case
            when not {{ is_there }} then {{ old_label }}
            when {{ was_there }} then {{ changed_values(attributes, 'old') }}
        end as old_value,
        case
            when not {{ was_there }} then {{ new_label }}
            when {{ is_there }} then {{ changed_values(attributes, 'new') }}
        end as new_value
{%- endmacro %}
