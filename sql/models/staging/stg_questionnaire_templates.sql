-- staging.stg_questionnaire_templates
-- Grain: one row per company type per namespace: the questionnaire without answers
-- (current state). Key: (namespace_company_id, company_type_id).
with

source as (
    select * from {{ raw_source('questionnaire_templates') }}
),

final as (
    select
        namespace_company_id,
        company_type_id,
        forms_json,
        synced_at,
        response_sha256
    from source
)

select * from final
