-- analytics.freshness (a view: its clock is the reader's)
-- Grain: one row per namespace that has at least one sync run recorded.
-- Key: namespace_company_id.
-- analytics.namespaces with the age of each namespace's last successful sync, computed
-- when the view is read (in the warehouse, the analysts' copy or a lake), never frozen
-- at the build; in a register as of a past date (var as_of, see raw_source) as it was then.
{{ config(materialized='view') }}
{%- set moment = register_as_of() or 'current_timestamp' %}

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
        round((epoch({{ moment }}) - epoch(last_success_at)) / 3600.0, 2)
            as hours_since_last_success,
        {{ moment }} as evaluated_at
    from namespaces
)

select * from final
