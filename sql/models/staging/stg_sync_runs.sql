-- staging.stg_sync_runs
-- Grain: one row per namespace per sync run. Key: (sync_id, namespace_company_id).
-- synced_at is the run's snapshot time (the boundary of its scd2 versions), shared by
-- every namespace of the run; a row without it (older raw shape) falls back to started_at.
with

source as (
    select * from {{ raw_source('sync_runs') }}
),

final as (
    select
        sync_id,
        namespace_company_id,
        coalesce(synced_at, started_at, finished_at) as synced_at,
        started_at,
        finished_at,
        status,
        requests as request_count,
        rows_loaded as loaded_row_count,
        issues as issue_count,
        error as error_message
    from source
)

select * from final
