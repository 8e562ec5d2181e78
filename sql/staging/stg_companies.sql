-- staging.stg_companies
-- Grain: one row per company per namespace: the namespace's own company and every
-- connection whose company details could be read (current state).
-- Key: (namespace_company_id, company_id).
with

source as (
    select * from {{ source('companies') }}
),

final as (
    select
        namespace_company_id,
        company_id,
        name as company_name,
        country,
        city,
        lei,
        cin,
        coalesce(is_namespace_company, company_id = namespace_company_id) as is_namespace_company,
        synced_at
    from source
)

select * from final
