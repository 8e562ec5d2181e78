-- staging.stg_questionnaire_fields
-- Grain: one row per field of each form of each current questionnaire, Labels
-- included. Key: (namespace_company_id, company_id, company_type_id, form_position,
-- field_position); field_id is expected to be unique within a questionnaire.
with

field_versions as (
    select * from {{ ref('stg_questionnaire_field_versions') }}
),

final as (
    select * exclude (is_current, valid_to)
    from field_versions
    where is_current
)

select * from final
