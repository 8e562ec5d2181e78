-- staging.stg_company_versions
-- Grain: one row per kept version of a company's details per namespace (dlt scd2
-- history): the namespace's own company and every connection whose details were read.
-- Key: (namespace_company_id, company_id, version_number); version_number counts
-- 1, 2, ... in order of valid_from.
-- valid_from is the synced_at of the sync that first loaded the version, valid_to that
-- of the sync that retired it (NULL while current). A raw table without scd2 columns
-- (the older delete-insert shape) reads as current versions valid from their synced_at.
with

source as (
    select * from {{ raw_source('companies') }}
),

final as (
    select
        namespace_company_id,
        company_id,
        row_number() over (
            partition by namespace_company_id, company_id
            order by coalesce(_dlt_valid_from, synced_at), content_hash
        ) as version_number,
        name as company_name,
        country,
        city,
        lei,
        cin,
        coalesce(is_namespace_company, company_id = namespace_company_id) as is_namespace_company,
        content_hash,
        response_sha256,
        coalesce(_dlt_valid_from, synced_at) as valid_from,
        _dlt_valid_to as valid_to,
        _dlt_valid_to is null as is_current,
        synced_at
    from source
)

select * from final
