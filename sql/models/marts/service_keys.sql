-- analytics.service_keys
-- Grain: one row per key path per endpoint the service ever sent, over every namespace.
-- Key: (endpoint, key_path).
-- first_* is the first sync that saw the key, last_* the latest sync that saw it (for a
-- key still sent: the latest successful sync of a namespace that sends it). is_current:
-- some namespace's latest sync still saw it. A key that nothing models (is_modelled
-- false) is kept only as JSON (documents.document_json, questionnaires.forms_json) or
-- not at all (companies, connections).
with

key_versions as (
    select * from {{ ref('stg_service_key_versions') }}
),

sync_runs as (
    select * from {{ ref('stg_sync_runs') }}
    where status = 'success'
),

seen as (
    -- each sync that saw a version: the successful syncs of its namespace within its validity
    select
        key_versions.endpoint,
        key_versions.key_path,
        key_versions.is_modelled,
        key_versions.namespace_company_id,
        key_versions.is_current,
        sync_runs.sync_id,
        sync_runs.synced_at
    from key_versions
    join sync_runs
        on sync_runs.namespace_company_id = key_versions.namespace_company_id
        and sync_runs.synced_at >= key_versions.valid_from
        and (key_versions.valid_to is null or sync_runs.synced_at < key_versions.valid_to)
),

final as (
    select
        endpoint,
        key_path,
        bool_or(is_modelled) as is_modelled,
        arg_min(sync_id, synced_at) as first_sync_id,
        min(synced_at) as first_seen_at,
        arg_max(sync_id, synced_at) as last_sync_id,
        max(synced_at) as last_seen_at,
        bool_or(is_current) as is_current,
        count(distinct namespace_company_id) as namespace_count
    from seen
    group by endpoint, key_path
)

select * from final
