-- staging.stg_companies
-- Grain: one row per company per namespace: the namespace's own company and every
-- connection whose company details could be read (current state: the scd2 version with
-- no valid_to).
-- Key: (namespace_company_id, company_id).
with

versions as (
    select * from {{ ref('stg_company_versions') }}
),

final as (
    select
        namespace_company_id,
        company_id,
        company_name,
        country,
        city,
        lei,
        cin,
        is_namespace_company,
        version_number,
        valid_from,
        synced_at,
        response_sha256
    from versions
    where is_current
)

select * from final
