{#- as_of(): the build's "now" as a TIMESTAMPTZ in UTC: var `as_of` (a UTC timestamp
    without zone) when given, else the time of the build. -#}
{% macro as_of() -%}
    {%- set value = var('as_of', none) -%}
    {%- if value is none or value == '' -%}
        current_timestamp
    {%- else -%}
        timezone('UTC', cast({{ sql_string(value) }} as timestamp))
    {%- endif -%}
{%- endmacro %}

{#- register_as_of(): as_of() when the build shows the warehouse as it stood then (var
    `as_of` given and var `versions_at_as_of` true, see raw_source), else none: the
    present, with every version. -#}
{% macro register_as_of() -%}
    {%- set value = var('as_of', none) -%}
    {{ return(as_of() if value is not none and value != '' and var('versions_at_as_of', true) else none) }}
{%- endmacro %}

{#- expiring_within_days(): var `expiring_within_days` as an INTEGER literal. -#}
{% macro expiring_within_days() -%}
    cast({{ var('expiring_within_days') | int }} as integer)
{%- endmacro %}

{#- time_zone(): var `time_zone` (an IANA name such as 'Europe/Zurich', checked by
    diligence before the build) as a SQL string: the zone whose calendar days count. -#}
{% macro time_zone() -%}
    {{ sql_string(var('time_zone', 'UTC') or 'UTC') }}
{%- endmacro %}
