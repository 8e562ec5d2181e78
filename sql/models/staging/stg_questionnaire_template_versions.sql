-- staging.stg_questionnaire_template_versions
-- Grain: one row per field of each form of each kept version of a company type's
-- questionnaire template per namespace (dlt scd2 history; Labels included).
-- Key: (namespace_company_id, company_type_id, valid_from, form_position, field_position).
-- valid_from is the synced_at of the sync that first loaded the version, valid_to that
-- of the sync that retired it (NULL while current). forms_json is parsed by the macro
-- form_fields, as for the questionnaires.
with

source as (
    select * from {{ raw_source('questionnaire_templates') }}
),

versions as (
    select
        namespace_company_id,
        company_type_id,
        coalesce(_dlt_valid_from, synced_at) as valid_from,
        _dlt_valid_to as valid_to,
        response_sha256,
        forms_json
    from source
),

fields as (
    {{ form_fields('versions') }}
),

final as (
    select
        namespace_company_id,
        company_type_id,
        valid_from,
        valid_to,
        valid_to is null as is_current,
        form_id,
        form_position,
        field.id as field_id,
        field.type as field_type,
        field.label as field_label,
        list_filter(field.options, lambda o: o is not null) as field_options,
        field_position,
        response_sha256
    from fields
)

select * from final
