{#-
    form_fields(relation): one row per field of each form in the `forms_json` of every row
    of `relation` (a questionnaire or template as the service sent it), with the row's
    other columns, and form_id, form_label, form_position, field_position (1-based) and
    `field`: a struct of id, type, label, options ({id, value} list) and information (raw
    JSON). forms_json is parsed once with json_transform: only these properties are
    read, unknown ones are ignored, one of the wrong shape is NULL. JSON null entries in
    the forms or fields lists give a NULL `field` (positions still count them).
-#}
{% macro form_fields(relation) -%}
    select
        * exclude (field_item),
        field_item.field as field,
        cast(field_item.field_position as integer) as field_position
    from (
        select
            * exclude (form_item),
            form_item.form.id as form_id,
            form_item.form.label as form_label,
            cast(form_item.form_position as integer) as form_position,
            unnest(list_transform(
                form_item.form.fields, lambda field, i: {'field': field, 'field_position': i}
            )) as field_item
        from (
            select
                * exclude (forms_json),
                unnest(list_transform(
                    json_transform(
                        forms_json,
                        '[{"id": "VARCHAR", "label": "VARCHAR",
                           "fields": [{"id": "VARCHAR", "type": "VARCHAR", "label": "VARCHAR",
                                       "options": [{"id": "VARCHAR", "value": "VARCHAR"}],
                                       "information": "JSON"}]}]'
                    ),
                    lambda form, i: {'form': form, 'form_position': i}
                )) as form_item
            from {{ relation }}
        )
    )
{%- endmacro %}
