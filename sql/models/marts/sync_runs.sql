-- analytics.sync_runs
-- Grain: one row per namespace per sync run, every run kept (the raw log of runs).
-- Key: (sync_id, namespace_company_id).
-- A run with status 'success' loaded the namespace's whole snapshot: every current row of
-- that namespace was confirmed by it. A 'failed' run loaded nothing for the namespace.
with

runs as (
    select * from {{ ref('stg_sync_runs') }}
),

final as (
    select
        sync_id,
        namespace_company_id,
        synced_at,
        started_at,
        finished_at,
        status,
        request_count,
        loaded_row_count,
        issue_count,
        error_message
    from runs
)

select * from final
