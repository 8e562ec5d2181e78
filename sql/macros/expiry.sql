{#-
    The expiry rule, in one place, by calendar day: a document's expiry day is the date
    its expiration timestamp carries as sent (the service's timestamps have no zone: read
    as UTC); the day it is evaluated on is `as_of`'s date in the configured time zone
    (var `time_zone`, UTC by default). 'invalid_date' when the date was present but did
    not parse, 'no_expiry' when it is missing, 'expired' when its day is before the
    evaluation day, 'expiring' from the evaluation day to N days after it, else 'valid'.
-#}
{% macro expiry_status(expiration_date, is_invalid, as_of, within_days) -%}
    case
        when {{ is_invalid }} then 'invalid_date'
        when {{ expiration_date }} is null then 'no_expiry'
        when {{ expiry_day(expiration_date) }} < {{ calendar_day(as_of) }} then 'expired'
        when {{ expiry_day(expiration_date) }} <= {{ calendar_day(as_of) }} + {{ within_days }}
            then 'expiring'
        else 'valid'
    end
{%- endmacro %}

{#- Calendar days from the evaluation day to the expiry day: 0 on the day itself,
    negative once it has passed; NULL without a date. -#}
{% macro days_until_expiry(expiration_date, as_of) -%}
    cast(date_diff('day', {{ calendar_day(as_of) }}, {{ expiry_day(expiration_date) }}) as integer)
{%- endmacro %}

{#- The date an expiration TIMESTAMPTZ carries as sent (its UTC wall date). -#}
{% macro expiry_day(expiration_date) -%}
    cast(timezone('UTC', {{ expiration_date }}) as date)
{%- endmacro %}

{#- The calendar date of the instant `at` (a TIMESTAMPTZ) in the configured time zone. -#}
{% macro calendar_day(at) -%}
    cast(timezone({{ time_zone() }}, {{ at }}) as date)
{%- endmacro %}
