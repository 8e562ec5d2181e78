-- analytics.connection_history
-- Grain: one row per kept version of a connection of a namespace (dlt scd2 history of the
-- connection list/detail, with its reading rights).
-- Key: (namespace_company_id, company_id, valid_from); also unique: version_number.
-- A version ends (valid_to) when the connection changed (a newer version starts at the
-- same time: end_reason 'changed') or when it was no longer listed (end_reason
-- 'disconnected'). Reading rights given or withdrawn are listed against the previous
-- version, so a withdrawn and later restored right shows as received_withdrawn on one
-- version and received_added on a later one.
--
-- Columns:
-- - version_number: 1, 2, ... in order of valid_from, per connection.
-- - name: Company name as the connection list/detail gave it in this version.
-- - country: Country as the connection list/detail gave it in this version.
-- - given_company_type_ids: Company types the namespace let the connection read.
-- - received_company_type_ids: Company types the connection let the namespace read.
-- - is_detail_available: True when the connection detail (reading rights) could be read.
-- - valid_from: synced_at of the sync that first saw this version (TIMESTAMPTZ, UTC).
-- - valid_to: synced_at of the sync that no longer saw it (TIMESTAMPTZ, UTC); NULL while
--   current.
-- - is_current: True for the version in effect now (valid_to is NULL).
-- - change_type: How the version began: 'connected' (first version), 'changed' (replaced
--   the previous version at once) or 'reconnected' (after a time with no connection).
-- - end_reason: How the version ended: 'changed' (a newer version replaced it),
--   'disconnected' (the connection was no longer listed); NULL while current.
-- - given_added: Given company types not in the previous version.
-- - given_withdrawn: Given company types of the previous version no longer given.
-- - received_added: Received company types not in the previous version.
-- - received_withdrawn: Received company types of the previous version no longer received
--   (access withdrawn).
with

versions as (
    select * from staging.stg_connection_versions
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

final as (
    select
        namespace_company_id,
        company_id,
        version_number,
        company_name as name,
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
        ) as received_withdrawn
    from with_neighbours
)

select * from final
