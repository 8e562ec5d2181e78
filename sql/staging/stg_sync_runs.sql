-- staging.stg_sync_runs
-- Grain: one row per namespace per sync run. Key: (sync_id, namespace_company_id).
with

source as (
    select * from {{ source('sync_runs') }}
),

final as (
    select
        sync_id,
        namespace_company_id,
        started_at,
        finished_at,
        status,
        requests as request_count,
        rows_loaded as loaded_row_count,
        issues as issue_count,
        error as error_message,
        synced_at
    from source
)

select * from final
