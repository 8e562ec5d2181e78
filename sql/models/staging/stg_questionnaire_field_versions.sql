-- staging.stg_questionnaire_field_versions
-- Grain: one row per field of each form of each kept questionnaire version, Labels
-- included. Key: (namespace_company_id, company_id, company_type_id, version_number,
-- form_position, field_position).
-- forms_json is parsed once with json_transform: only the properties named below are
-- read (unknown extra properties are ignored), a property of the wrong shape becomes
-- NULL, and `information` (the answer) stays raw JSON whatever its shape. JSON null
-- entries in the forms or fields lists are skipped (positions still count them).
with

versions as (
    select * from {{ ref('stg_questionnaire_versions') }}
),

parsed as (
    select
        * exclude (forms_json),
        json_transform(
            forms_json,
            '[{"id": "VARCHAR", "label": "VARCHAR",
               "fields": [{"id": "VARCHAR", "type": "VARCHAR", "label": "VARCHAR",
                           "options": [{"id": "VARCHAR", "value": "VARCHAR"}],
                           "information": "JSON"}]}]'
        ) as forms
    from versions
),

forms as (
    select
        * exclude (forms),
        unnest(list_transform(forms, lambda form, i: {'form': form, 'form_position': i})) as form_item
    from parsed
),

fields as (
    select
        * exclude (form_item),
        form_item.form.id as form_id,
        form_item.form.label as form_label,
        form_item.form_position as form_position,
        unnest(list_transform(
            form_item.form.fields, lambda field, i: {'field': field, 'field_position': i}
        )) as field_item
    from forms
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
        cast(form_position as integer) as form_position,
        field_item.field.id as field_id,
        field_item.field.type as field_type,
        field_item.field.label as field_label,
        cast(field_item.field_position as integer) as field_position,
        coalesce(
            list_filter(field_item.field.options, lambda o: o is not null), []
        ) as field_options,
        case
            when json_type(field_item.field.information) <> 'NULL'
                then field_item.field.information
        end as information,
        synced_at,
        response_sha256
    from fields
    where field_item.field is not null
)

select * from final
