-- staging.stg_sync_issues
-- Grain: one row per denied (403/404) or failed request of each sync, all syncs.
-- Key: (sync_id, namespace_company_id, endpoint, company_id, company_type_id).
with

source as (
    select * from {{ raw_source('sync_issues') }}
),

final as (
    select
        sync_id,
        namespace_company_id,
        endpoint,
        company_id,
        company_type_id,
        http_status,
        message,
        synced_at
    from source
)

select * from final
