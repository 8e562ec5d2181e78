-- analytics.sync_issues
-- Grain: one row per request of each namespace's latest sync that was denied (403/404)
-- or failed. Key: (namespace_company_id, endpoint, company_id, company_type_id).
-- The latest sync of a namespace is its latest run in sync_runs (by started_at); for a
-- namespace with no run recorded, the sync of its most recent issue.
--
-- Columns:
-- - endpoint: The endpoint of the denied or failed request.
-- - company_id: Company of the request (NULL when it is not about one company).
-- - company_type_id: Company type of the request (NULL when not about one type).
-- - http_status: HTTP status of the answer: 403 denied, 404 not found, other: failed.
-- - message: The service's message, or why the request failed.
-- - synced_at: synced_at of the sync that met the issue (TIMESTAMPTZ, UTC).
with

runs as (
    select * from staging.stg_sync_runs
),

issues as (
    select * from staging.stg_sync_issues
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
        issues.company_type_id,
        issues.http_status,
        issues.message,
        issues.synced_at,
        issues.sync_id
    from issues
    join latest_syncs
        on latest_syncs.namespace_company_id = issues.namespace_company_id
        and latest_syncs.sync_id is not distinct from issues.sync_id
)

select * from final
