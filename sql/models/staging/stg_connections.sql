-- staging.stg_connections
-- Grain: one row per listed connection per namespace (current state: the scd2 version
-- with no valid_to).
-- Key: (namespace_company_id, company_id).
with

versions as (
    select * from {{ ref('stg_connection_versions') }}
),

final as (
    select
        namespace_company_id,
        company_id,
        company_name,
        country,
        given_company_type_ids,
        received_company_type_ids,
        is_detail_available,
        version_number,
        valid_from,
        synced_at,
        response_sha256
    from versions
    where is_current
)

select * from final
