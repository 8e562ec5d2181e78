-- staging.stg_connection_versions
-- Grain: one row per kept version of a connection per namespace (dlt scd2 history), with
-- the reading rights of that version.
-- Key: (namespace_company_id, company_id, version_number); version_number counts
-- 1, 2, ... in order of valid_from.
-- valid_from is the synced_at of the sync that first loaded the version, valid_to that
-- of the sync that retired it (NULL while current). A raw table without scd2 columns
-- (the older delete-insert shape) reads as current versions valid from their synced_at,
-- with is_history_kept false (their valid_from is only the last load).
with

source as (
    select * from {{ raw_source('connections') }}
),

final as (
    select
        namespace_company_id,
        company_id,
        row_number() over (
            partition by namespace_company_id, company_id
            order by coalesce(_dlt_valid_from, synced_at), content_hash
        ) as version_number,
        name as company_name,
        country,
        coalesce(cast(given_company_type_ids as varchar[]), []) as given_company_type_ids,
        coalesce(cast(received_company_type_ids as varchar[]), []) as received_company_type_ids,
        coalesce(has_detail, false) as is_detail_available,
        content_hash,
        response_sha256,
        coalesce(_dlt_valid_from, synced_at) as valid_from,
        _dlt_valid_to as valid_to,
        _dlt_valid_to is null as is_current,
        _dlt_valid_from is not null as is_history_kept,
        synced_at
    from source
)

select * from final
