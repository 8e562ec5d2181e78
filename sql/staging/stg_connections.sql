-- staging.stg_connections
-- Grain: one row per listed connection per namespace (current state).
-- Key: (namespace_company_id, company_id).
with

source as (
    select * from {{ source('connections') }}
),

final as (
    select
        namespace_company_id,
        company_id,
        name as company_name,
        country,
        coalesce(cast(given_company_type_ids as varchar[]), []) as given_company_type_ids,
        coalesce(cast(received_company_type_ids as varchar[]), []) as received_company_type_ids,
        coalesce(has_detail, false) as is_detail_available,
        synced_at
    from source
)

select * from final
