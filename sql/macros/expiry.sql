{#-
    The expiry rule, in one place: the status of a document's expiration date at `as_of`
    with a window of `within_days` days.
    'invalid_date' when the date was present but did not parse, 'no_expiry' when it is
    missing, 'expired' when before as_of, 'expiring' from as_of to as_of + N days,
    else 'valid'.
-#}
{% macro expiry_status(expiration_date, is_invalid, as_of, within_days) -%}
    case
        when {{ is_invalid }} then 'invalid_date'
        when {{ expiration_date }} is null then 'no_expiry'
        when {{ expiration_date }} < {{ as_of }} then 'expired'
        when {{ expiration_date }} <= {{ as_of }} + to_days({{ within_days }}) then 'expiring'
        else 'valid'
    end
{%- endmacro %}

{#- Whole days from as_of to the expiration date (floor); NULL without a date. -#}
{% macro days_until_expiry(expiration_date, as_of) -%}
    cast(
        floor((epoch_us({{ expiration_date }}) - epoch_us({{ as_of }})) / 86400000000.0)
        as integer
    )
{%- endmacro %}
