-- staging.stg_documents
-- Grain: one row per current document (the scd2 version with no valid_to) per company
-- type per company per namespace.
-- Key: (namespace_company_id, company_id, company_type_id, document_id).
-- Dates are parsed in stg_document_versions (see its header).
with

versions as (
    select * from {{ ref('stg_document_versions') }}
),

final as (
    select * exclude (valid_to, is_current)
    from versions
    where is_current
)

select * from final
