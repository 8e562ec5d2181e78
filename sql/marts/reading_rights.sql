-- analytics.reading_rights
-- Grain: one row per connection per company type per direction.
-- Key: (namespace_company_id, company_id, company_type_id, direction).
-- direction: 'given' = rights the namespace gave the connection, 'received' = rights
-- the namespace received from it.
--
-- Columns:
-- - company_name: Name of the connection (as in analytics.connections).
-- - company_type_id: Company type the right is about.
-- - direction: 'given' (the namespace lets the connection read the type) or 'received'
--   (the connection lets the namespace read it).
with

connections as (
    select * from analytics.connections
),

given as (
    select
        namespace_company_id,
        company_id,
        name as company_name,
        unnest(given_company_type_ids) as company_type_id,
        'given' as direction,
        synced_at
    from connections
),

received as (
    select
        namespace_company_id,
        company_id,
        name as company_name,
        unnest(received_company_type_ids) as company_type_id,
        'received' as direction,
        synced_at
    from connections
),

final as (
    select distinct * from given where company_type_id is not null
    union all
    select distinct * from received where company_type_id is not null
)

select * from final
