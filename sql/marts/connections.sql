-- analytics.connections
-- Grain: one row per connection per namespace. Key: (namespace_company_id, company_id).
-- name and country come from the company details (endpoint 4) when they could be read,
-- else from the connection list/detail; city, lei and cin only from company details.
with

connections as (
    select * from staging.stg_connections
),

companies as (
    select * from staging.stg_companies
),

final as (
    select
        connections.namespace_company_id,
        connections.company_id,
        coalesce(companies.company_name, connections.company_name) as name,
        coalesce(companies.country, connections.country) as country,
        companies.city,
        companies.lei,
        companies.cin,
        connections.given_company_type_ids,
        connections.received_company_type_ids,
        connections.is_detail_available,
        companies.company_id is not null as is_company_available,
        connections.synced_at
    from connections
    left join companies
        on companies.namespace_company_id = connections.namespace_company_id
        and companies.company_id = connections.company_id
)

select * from final
