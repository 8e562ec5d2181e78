-- analytics.sync_runs
-- Grain: one row per namespace per sync run, every run kept (the raw log of runs).
-- Key: (sync_id, namespace_company_id).
-- A run with status 'success' loaded the namespace's whole snapshot: every current row of
-- that namespace was confirmed by it. A 'failed' run loaded nothing for the namespace.
--
-- Columns:
-- - synced_at: Snapshot time of the run (TIMESTAMPTZ, UTC), shared by all its namespaces;
--   scd2 versions loaded by the run start at it, versions it retired end at it.
-- - started_at: When the run started on this namespace (TIMESTAMPTZ, UTC).
-- - finished_at: When the run finished this namespace (TIMESTAMPTZ, UTC).
-- - status: 'success' (snapshot loaded) or 'failed' (nothing loaded for the namespace).
-- - request_count: HTTP requests made for the namespace in this run.
-- - loaded_row_count: Raw rows loaded for the namespace in this run.
-- - issue_count: Requests denied (403/404) or failed in this run, see sync_issues.
-- - error_message: Why the namespace failed (NULL on success).
with

runs as (
    select * from staging.stg_sync_runs
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
