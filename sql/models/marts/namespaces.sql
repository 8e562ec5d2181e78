-- analytics.namespaces
-- Grain: one row per namespace that has at least one sync run recorded.
-- Key: namespace_company_id.
-- Where each namespace stands: its own company's name and the outcome of its syncs. The
-- current rows of a namespace are exactly as fresh as its last successful sync
-- (last_success_at), which is also the synced_at of every current row of that namespace.
-- analytics.freshness adds the age of that sync, computed when it is read.
with

runs as (
    select * from {{ ref('stg_sync_runs') }}
),

companies as (
    select * from {{ ref('stg_companies') }}
),

per_namespace as (
    select
        namespace_company_id,
        arg_max(sync_id, synced_at) as last_sync_id,
        max(synced_at) as last_synced_at,
        arg_max(status, synced_at) as last_status,
        arg_max(error_message, synced_at) as last_error_message,
        max(synced_at) filter (where status = 'success') as last_success_at,
        max(synced_at) filter (where status <> 'success') as last_failure_at,
        count(*) filter (where status = 'success') as successful_sync_count,
        count(*) filter (where status <> 'success') as failed_sync_count
    from runs
    where namespace_company_id is not null
    group by namespace_company_id
),

final as (
    select
        per_namespace.namespace_company_id,
        companies.company_name as namespace_name,
        per_namespace.last_sync_id,
        per_namespace.last_synced_at,
        per_namespace.last_status,
        per_namespace.last_error_message,
        per_namespace.last_success_at,
        per_namespace.last_failure_at,
        cast(per_namespace.successful_sync_count as integer) as successful_sync_count,
        cast(per_namespace.failed_sync_count as integer) as failed_sync_count
    from per_namespace
    left join companies
        on companies.namespace_company_id = per_namespace.namespace_company_id
        and companies.company_id = per_namespace.namespace_company_id
)

select * from final
