{#-
    A change's value in words (analytics.changes' old_text / new_text), from its
    old_value / new_value:
      reading rights       'given: t1, t2; received: none' (the company type ids: the
                           service gives types no name)
      changed values       'expiration date: 2029-02-20; name: Bank reference 2026'
                           (a JSON object of the changed values: company_changed,
                           document_changed, template_field_changed)
      anything else        as it is (answers are already text, option labels included)
    Dates are shown as dates (a time only when it is not midnight), options by their
    labels, a missing value as '(none)'.
-#}
{% macro change_words(kind, value) -%}
    case
        when {{ value }} is null then null
        when {{ kind }} in ('connection_added', 'connection_removed', 'reading_rights_changed')
            then {{ rights_words(value) }}
        when {{ kind }} in ('company_changed', 'document_changed', 'template_field_changed')
            then {{ values_words(value) }}
        else {{ value }}
    end
{%- endmacro %}

{#- '{"given": [...], "received": [...]}' in words. -#}
{% macro rights_words(value) -%}
    'given: ' || coalesce(nullif(array_to_string(
        cast(json_extract(cast({{ value }} as json), 'given') as varchar[]), ', '), ''), 'none')
    || '; received: ' || coalesce(nullif(array_to_string(
        cast(json_extract(cast({{ value }} as json), 'received') as varchar[]), ', '), ''), 'none')
{%- endmacro %}

{#- A JSON object of values in words, key by key ('expirationDate' -> 'expiration date'). -#}
{% macro values_words(value) -%}
    array_to_string(list_transform(
        json_keys(cast({{ value }} as json)),
        lambda key: lower(regexp_replace(replace(key, '_', ' '), '([a-z])([A-Z])', '\1 \2', 'g'))
            || ': ' || {{ json_words("json_extract(cast(" ~ value ~ " as json), key)") }}
    ), '; ')
{%- endmacro %}

{#- One JSON value in words: a list by its items (an option by its label), a timestamp
    as a date, a missing value as '(none)'. -#}
{% macro json_words(json) -%}
    case json_type({{ json }})
        when 'NULL' then '(none)'
        when 'ARRAY' then coalesce(nullif(array_to_string(list_transform(
            cast({{ json }} as json[]),
            lambda item: case json_type(item)
                when 'OBJECT' then coalesce(json_extract_string(item, 'value'), json_extract_string(item, 'id'))
                else json_extract_string(item, '$')
            end), ', '), ''), '(none)')
        else {{ date_words("json_extract_string(" ~ json ~ ", '$')") }}
    end
{%- endmacro %}

{#- Text that is an ISO timestamp as a date (and its time, unless midnight); other text
    as it is. -#}
{% macro date_words(text) -%}
    case
        when regexp_matches({{ text }}, '^\d{4}-\d{2}-\d{2}[T ]00:00:00(\.0+)?(Z|[+-]00(:?00)?)?$')
            then left({{ text }}, 10)
        when regexp_matches({{ text }}, '^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}')
            then replace(left({{ text }}, 19), 'T', ' ')
        else {{ text }}
    end
{%- endmacro %}
