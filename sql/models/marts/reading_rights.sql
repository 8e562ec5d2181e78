-- analytics.reading_rights
-- Grain: one row per connection per company type per direction.
-- Key: (namespace_company_id, company_id, company_type_id, direction).
-- direction: 'given' = rights the namespace gave the connection, 'received' = rights
-- the namespace received from it.
with

connections as (
    select * from {{ ref('connections') }}
),

given as (
    select
        namespace_company_id,
        company_id,
        company_name,
        is_own_company,
        unnest(given_company_type_ids) as company_type_id,
        'given' as direction,
        synced_at
    from connections
),

received as (
    select
        namespace_company_id,
        company_id,
        company_name,
        is_own_company,
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
