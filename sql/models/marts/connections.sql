-- analytics.connections
-- Grain: one row per current connection per namespace. Key: (namespace_company_id, company_id).
-- company_name and country come from the company details (endpoint 4) when they could be read,
-- else from the connection list/detail; city, lei and cin only from company details.
-- A connection removed upstream leaves this table; connection_history keeps its versions
-- and counterparties says when it was lost.
with

connections as (
    select * from {{ ref('stg_connections') }}
),

companies as (
    select * from {{ ref('stg_companies') }}
),

freshness as (
    select * from {{ ref('namespaces') }}
),

final as (
    select
        connections.namespace_company_id,
        connections.company_id,
        coalesce(companies.company_name, connections.company_name) as company_name,
        connections.company_id = connections.namespace_company_id as is_own_company,
        coalesce(companies.country, connections.country) as country,
        companies.city,
        companies.lei,
        companies.cin,
        connections.given_company_type_ids,
        connections.received_company_type_ids,
        connections.is_detail_available,
        companies.company_id is not null as is_company_available,
        greatest(connections.valid_from, companies.valid_from) as versioned_at,
        greatest(connections.synced_at, companies.synced_at, freshness.last_success_at)
            as synced_at,
        connections.response_sha256,
        companies.response_sha256 as company_response_sha256
    from connections
    left join companies
        on companies.namespace_company_id = connections.namespace_company_id
        and companies.company_id = connections.company_id
    left join freshness
        on freshness.namespace_company_id = connections.namespace_company_id
)

select * from final
