-- analytics.freshness (a view: its clock is the reader's)
-- Grain: one row per namespace that has at least one sync run recorded.
-- Key: namespace_company_id.
-- analytics.namespaces with the age of each namespace's last successful sync, computed
-- when the view is read (in the warehouse, the analysts' copy or a lake), never frozen
-- at the build.
{{ config(materialized='view') }}

with

namespaces as (
    select * from {{ ref('namespaces') }}
),

final as (
    select
        namespace_company_id,
        namespace_name,
        last_sync_id,
        last_synced_at,
        last_status,
        last_error_message,
        last_success_at,
        last_failure_at,
        successful_sync_count,
        failed_sync_count,
        round((epoch(current_timestamp) - epoch(last_success_at)) / 3600.0, 2)
            as hours_since_last_success,
        current_timestamp as evaluated_at
    from namespaces
)

select * from final
