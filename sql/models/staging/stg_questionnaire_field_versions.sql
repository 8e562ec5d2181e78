-- staging.stg_questionnaire_field_versions
-- Grain: one row per field of each form of each kept questionnaire version, Labels
-- included. Key: (namespace_company_id, company_id, company_type_id, version_number,
-- form_position, field_position).
-- forms_json is parsed by the macro form_fields (unknown properties ignored, a property
-- of the wrong shape NULL); `information` (the answer) stays raw JSON whatever its
-- shape. JSON null entries in the forms or fields lists are skipped (positions still
-- count them).
with

versions as (
    select * from {{ ref('stg_questionnaire_versions') }}
),

fields as (
    {{ form_fields('versions') }}
),

final as (
    select
        namespace_company_id,
        company_id,
        company_type_id,
        version_number,
        is_current,
        valid_from,
        valid_to,
        form_id,
        form_label,
        form_position,
        field.id as field_id,
        field.type as field_type,
        field.label as field_label,
        field_position,
        coalesce(list_filter(field.options, lambda o: o is not null), []) as field_options,
        case when json_type(field.information) <> 'NULL' then field.information end as information,
        synced_at,
        response_sha256
    from fields
    where field is not null
)

select * from final
