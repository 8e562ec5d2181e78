-- analytics.sync_issues
-- Grain: one row per request of each namespace's latest sync that was denied (403/404)
-- or failed. Key: (namespace_company_id, endpoint, company_id, company_type_id).
-- The latest sync of a namespace is its latest run in sync_runs (by started_at); for a
-- namespace with no run recorded, the sync of its most recent issue.
with

runs as (
    select * from {{ ref('stg_sync_runs') }}
),

issues as (
    select * from {{ ref('stg_sync_issues') }}
),

company_names as (
    select * from {{ ref('stg_company_names') }}
),

latest_runs as (
    select
        namespace_company_id,
        arg_max(sync_id, coalesce(started_at, finished_at)) as sync_id
    from runs
    group by namespace_company_id
),

latest_issue_syncs as (
    select
        namespace_company_id,
        arg_max(sync_id, synced_at) as sync_id
    from issues
    where namespace_company_id not in (
        select namespace_company_id from latest_runs where namespace_company_id is not null
    )
    group by namespace_company_id
),

latest_syncs as (
    select * from latest_runs
    union all
    select * from latest_issue_syncs
),

final as (
    select
        issues.namespace_company_id,
        issues.endpoint,
        issues.company_id,
        company_names.company_name,
        coalesce(issues.company_id = issues.namespace_company_id, false) as is_own_company,
        issues.company_type_id,
        issues.http_status,
        issues.message,
        issues.synced_at,
        issues.sync_id
    from issues
    join latest_syncs
        on latest_syncs.namespace_company_id = issues.namespace_company_id
        and latest_syncs.sync_id is not distinct from issues.sync_id
    left join company_names
        on company_names.namespace_company_id = issues.namespace_company_id
        and company_names.company_id = issues.company_id
)

select * from final
