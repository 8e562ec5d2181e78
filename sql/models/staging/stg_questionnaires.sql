-- staging.stg_questionnaires
-- Grain: one row per current questionnaire (the scd2 version with no valid_to).
-- Key: (namespace_company_id, company_id, company_type_id).
with

versions as (
    select * from {{ ref('stg_questionnaire_versions') }}
),

final as (
    select
        namespace_company_id,
        company_id,
        company_type_id,
        version_number,
        valid_from,
        forms_json,
        content_hash,
        synced_at,
        response_sha256
    from versions
    where is_current
)

select * from final
