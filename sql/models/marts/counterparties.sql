-- analytics.counterparties
-- Grain: one row per company ever seen as a connection of any namespace, connected now
-- or not. Key: company_id.
-- The counterparty dimension: a company connected through several namespaces is one row
-- here (namespace_company_ids lists them), and two companies with the same name are two
-- rows, so count and group by company_id, never by name.
-- Name and identifiers are the latest known: from the latest company details read
-- through any namespace, else from the latest connection list/detail.
-- last_seen_at: for a current connection, the last successful sync of its namespace
-- (which confirmed it); for an ended one, the last successful sync before it was lost
-- (falling back to the start of its last version); the latest over all namespaces.
with

connection_versions as (
    select * from {{ ref('stg_connection_versions') }}
),

company_versions as (
    select * from {{ ref('stg_company_versions') }}
),

runs as (
    select * from {{ ref('stg_sync_runs') }}
),

freshness as (
    select * from {{ ref('namespaces') }}
),

namespaces as (
    select namespace_company_id from connection_versions
    union
    select namespace_company_id from company_versions
    union
    select namespace_company_id from runs
),

successful_runs as (
    select namespace_company_id, synced_at
    from runs
    where status = 'success'
),

seen as (
    select
        connection_versions.namespace_company_id,
        connection_versions.company_id,
        connection_versions.valid_from,
        connection_versions.valid_to,
        connection_versions.is_current,
        case
            when connection_versions.is_current then greatest(
                connection_versions.synced_at, connection_versions.valid_from,
                freshness.last_success_at
            )
            else coalesce(
                (
                    select max(successful_runs.synced_at)
                    from successful_runs
                    where successful_runs.namespace_company_id
                        = connection_versions.namespace_company_id
                        and successful_runs.synced_at >= connection_versions.valid_from
                        and successful_runs.synced_at < connection_versions.valid_to
                ),
                connection_versions.valid_from
            )
        end as last_seen_at
    from connection_versions
    left join freshness
        on freshness.namespace_company_id = connection_versions.namespace_company_id
),

connection_spans as (
    select
        company_id,
        min(valid_from) as first_seen_at,
        max(last_seen_at) as last_seen_at,
        bool_or(is_current) as is_connected,
        max(valid_to) as last_valid_to,
        list_sort(list_distinct(list(namespace_company_id) filter (where is_current)))
            as namespace_company_ids
    from seen
    group by company_id
),

latest_listed as (
    select
        company_id,
        arg_max(company_name, (valid_from, version_number)) as company_name,
        arg_max(country, (valid_from, version_number)) as country
    from connection_versions
    group by company_id
),

latest_details as (
    select
        company_id,
        arg_max(company_name, (valid_from, version_number)) as company_name,
        arg_max(country, (valid_from, version_number)) as country,
        arg_max(city, (valid_from, version_number)) as city,
        arg_max(lei, (valid_from, version_number)) as lei,
        arg_max(cin, (valid_from, version_number)) as cin
    from company_versions
    group by company_id
),

final as (
    select
        connection_spans.company_id,
        coalesce(latest_details.company_name, latest_listed.company_name) as company_name,
        coalesce(latest_details.country, latest_listed.country) as country,
        latest_details.city,
        latest_details.lei,
        latest_details.cin,
        coalesce(connection_spans.namespace_company_ids, []) as namespace_company_ids,
        cast(len(coalesce(connection_spans.namespace_company_ids, [])) as integer)
            as namespace_count,
        connection_spans.is_connected,
        connection_spans.company_id in (select namespace_company_id from namespaces)
            as is_own_company,
        connection_spans.first_seen_at,
        connection_spans.last_seen_at,
        case when not connection_spans.is_connected then connection_spans.last_valid_to end
            as disconnected_at
    from connection_spans
    left join latest_listed
        on latest_listed.company_id = connection_spans.company_id
    left join latest_details
        on latest_details.company_id = connection_spans.company_id
)

select * from final
