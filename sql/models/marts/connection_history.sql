-- analytics.connection_history
-- Grain: one row per kept version of a connection of a namespace (dlt scd2 history of the
-- connection list/detail, with its reading rights).
-- Key: (namespace_company_id, company_id, valid_from); also unique: version_number.
-- A version ends (valid_to) when the connection changed (a newer version starts at the
-- same time: end_reason 'changed') or when it was no longer listed (end_reason
-- 'disconnected'). Reading rights given or withdrawn are listed against the previous
-- version, so a withdrawn and later restored right shows as received_withdrawn on one
-- version and received_added on a later one.
-- Incremental (macros/incremental.sql): a build replaces the versions that started or
-- ended at a sync since the table's last build.
{%- set watermarks = incremental_watermarks() %}
with

versions as (
    select * from {{ ref('stg_connection_versions') }}
),

with_neighbours as (
    select
        *,
        lag(valid_to) over connection as previous_valid_to,
        lag(given_company_type_ids) over connection as previous_given,
        lag(received_company_type_ids) over connection as previous_received,
        lead(valid_from) over connection as next_valid_from
    from versions
    window connection as (
        partition by namespace_company_id, company_id
        order by version_number
    )
),

new_versions as (
    select * from with_neighbours
    where {{ is_after_watermark(watermarks, ['valid_from', 'valid_to']) }}
),

final as (
    select
        namespace_company_id,
        company_id,
        version_number,
        company_name,
        company_id = namespace_company_id as is_own_company,
        country,
        given_company_type_ids,
        received_company_type_ids,
        is_detail_available,
        valid_from,
        valid_to,
        is_current,
        case
            when version_number = 1 then 'connected'
            when previous_valid_to = valid_from then 'changed'
            else 'reconnected'
        end as change_type,
        case
            when valid_to is null then null
            when next_valid_from = valid_to then 'changed'
            else 'disconnected'
        end as end_reason,
        list_filter(
            list_sort(list_distinct(given_company_type_ids)),
            lambda t: not list_contains(coalesce(previous_given, []), t)
        ) as given_added,
        list_filter(
            list_sort(list_distinct(coalesce(previous_given, []))),
            lambda t: not list_contains(given_company_type_ids, t)
        ) as given_withdrawn,
        list_filter(
            list_sort(list_distinct(received_company_type_ids)),
            lambda t: not list_contains(coalesce(previous_received, []), t)
        ) as received_added,
        list_filter(
            list_sort(list_distinct(coalesce(previous_received, []))),
            lambda t: not list_contains(received_company_type_ids, t)
        ) as received_withdrawn,
        response_sha256
    from new_versions
)

select * from final
