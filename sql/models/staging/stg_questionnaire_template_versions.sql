-- staging.stg_questionnaire_template_versions
-- Grain: one row per field of each form of each kept version of a company type's
-- questionnaire template per namespace (dlt scd2 history; Labels included).
-- Key: (namespace_company_id, company_type_id, valid_from, form_position, field_position).
-- valid_from is the synced_at of the sync that first loaded the version, valid_to that
-- of the sync that retired it (NULL while current). A template without fields is one
-- row with NULL field columns. forms_json is parsed as in stg_questionnaire_field_versions.
with

source as (
    select * from {{ raw_source('questionnaire_templates') }}
),

parsed as (
    select
        namespace_company_id,
        company_type_id,
        coalesce(_dlt_valid_from, synced_at) as valid_from,
        _dlt_valid_to as valid_to,
        response_sha256,
        json_transform(
            forms_json,
            '[{"id": "VARCHAR", "label": "VARCHAR",
               "fields": [{"id": "VARCHAR", "type": "VARCHAR", "label": "VARCHAR",
                           "options": [{"id": "VARCHAR", "value": "VARCHAR"}]}]}]'
        ) as forms
    from source
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
        form_item.form_position as form_position,
        unnest(list_transform(
            form_item.form.fields, lambda field, i: {'field': field, 'field_position': i}
        )) as field_item
    from forms
),

final as (
    select
        namespace_company_id,
        company_type_id,
        valid_from,
        valid_to,
        valid_to is null as is_current,
        form_id,
        cast(form_position as integer) as form_position,
        field_item.field.id as field_id,
        field_item.field.type as field_type,
        field_item.field.label as field_label,
        list_filter(field_item.field.options, lambda o: o is not null) as field_options,
        cast(field_item.field_position as integer) as field_position,
        response_sha256
    from fields
)

select * from final
