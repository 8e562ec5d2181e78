-- analytics.freshness
-- Grain: one row per namespace that has at least one sync run recorded.
-- Key: namespace_company_id.
-- How fresh the analytics tables are for each namespace: the current rows of a namespace
-- are exactly as fresh as its last successful sync (last_success_at), which is also the
-- synced_at of every current row of that namespace. A later failed sync leaves them as
-- they were (last_status = 'failed').
-- Build parameter: as_of (the build time unless given), for hours_since_last_success.
--
-- Columns:
-- - namespace_name: The namespace's own company name (from its company details).
-- - last_sync_id: The namespace's latest sync run, successful or not.
-- - last_synced_at: synced_at of the latest sync run (TIMESTAMPTZ, UTC).
-- - last_status: Status of the latest sync run: 'success' or 'failed'.
-- - last_error_message: Error of the latest sync run (NULL when it succeeded).
-- - last_success_at: synced_at of the latest successful sync (TIMESTAMPTZ, UTC): every
--   current row of the namespace was confirmed then. NULL if no sync ever succeeded.
-- - last_failure_at: synced_at of the latest failed sync (TIMESTAMPTZ, UTC), NULL if none.
-- - successful_sync_count: Number of successful syncs recorded.
-- - failed_sync_count: Number of failed syncs recorded.
-- - hours_since_last_success: Hours from last_success_at to evaluated_at.
-- - evaluated_at: The build's "now" (as_of, TIMESTAMPTZ, UTC).
with

runs as (
    select * from staging.stg_sync_runs
),

companies as (
    select * from staging.stg_companies
),

parameters as (
    select timezone('UTC', cast(getvariable('as_of') as timestamp)) as as_of
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
        cast(per_namespace.failed_sync_count as integer) as failed_sync_count,
        round(
            (epoch(parameters.as_of) - epoch(per_namespace.last_success_at)) / 3600.0, 2
        ) as hours_since_last_success,
        parameters.as_of as evaluated_at
    from per_namespace
    cross join parameters
    left join companies
        on companies.namespace_company_id = per_namespace.namespace_company_id
        and companies.company_id = per_namespace.namespace_company_id
)

select * from final
