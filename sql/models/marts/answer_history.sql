-- analytics.answer_history
-- Grain: one row per answerable (non-Label) field of each kept questionnaire version.
-- Key: (namespace_company_id, company_id, company_type_id, version_number, field_id).
--
-- How `information` (the raw answer JSON, kept in answer_json) is read:
--   {"options": [{"id", "value"}, ...]}  selected options (Dropdown, Checkbox)
--   {"values": [...]}                    several values (Checkbox variant, MultiSelect)
--   {"value": ...}                       one value (Input, Checkbox variant, DatePicker)
--   a bare JSON array / scalar           read like {"values"} / {"value"}
--   any other non-empty object           kept whole: answer_text is its JSON text
-- answer_text joins the values with '; '; empty or whitespace-only text or an empty
-- selection counts as unanswered (answer_text NULL, is_answered false; answer_json
-- still holds it).
-- selected_option_ids / selected_option_values: NULL when unanswered; for answered
-- option-based fields (Dropdown, Checkbox, any field with options, or an answer given
-- as {"options"}) every selected option, a missing id or value being looked up in
-- the field's options; [] for answered fields that are not option-based. A selected
-- option id that is not among the field's options (and comes without a value) is still
-- an answer: it is kept in selected_option_ids, has no entry in
-- selected_option_values, and answer_text shows the id.
-- Incremental (macros/incremental.sql): a build reads and replaces only the versions that
-- started or ended at a sync since the table's last build.
{%- set watermarks = incremental_watermarks() %}
with

field_versions as (
    {{ rows_after_watermark(ref('stg_questionnaire_field_versions'), watermarks, ['valid_from', 'valid_to']) }}
),

company_names as (
    select * from {{ ref('stg_company_names') }}
),
{%- if watermarks is not none %}

built as (
    select * from {{ this }}
),
{%- endif %}

answerable as (
    select *
    from field_versions
    where field_type is null or lower(field_type) <> 'label'
),

shaped as (
    select
        *,
        case json_type(information)
            when 'OBJECT' then
                case
                    when json_type(information, '$.options') = 'ARRAY' then 'options'
                    when json_type(information, '$.values') = 'ARRAY' then 'values'
                    when json_exists(information, '$.value') then 'value'
                    when json_keys(information) <> [] then 'other'
                end
            when 'ARRAY' then 'values'
            when 'NULL' then null
            else 'value'
        end as answer_shape
    from answerable
),

items as (
    select
        *,
        case answer_shape
            when 'options' then information -> '$.options[*]'
            when 'values' then
                case
                    when json_type(information) = 'ARRAY' then information -> '$[*]'
                    else information -> '$.values[*]'
                end
            when 'value' then
                case
                    when json_type(information) = 'OBJECT' then [information -> '$.value']
                    else [information]
                end
        end as answer_elements
    from shaped
),

resolved as (
    select
        *,
        -- a value of only whitespace (or empty) is no value
        list_transform(
            answer_elements,
            lambda e: {
                'id': case when json_type(e) = 'OBJECT' then e ->> 'id' end,
                'value': nullif(
                    regexp_replace(
                        case when json_type(e) = 'OBJECT' then e ->> 'value' else e ->> '$' end,
                        '^\s+$',
                        ''
                    ),
                    ''
                )
            }
        ) as raw_items
    from items
),

looked_up as (
    select
        *,
        list_transform(
            raw_items,
            lambda item: {
                'id': coalesce(
                    item.id, list_filter(field_options, lambda o: o.value = item.value)[1].id
                ),
                'value': coalesce(
                    item.value, list_filter(field_options, lambda o: o.id = item.id)[1].value
                )
            }
        ) as answer_items
    from resolved
),

answered as (
    select
        *,
        case
            when answer_shape = 'other' then cast(information as varchar)
            else nullif(
                array_to_string(
                    list_filter(
                        list_transform(answer_items, lambda item: coalesce(item.value, item.id)),
                        lambda v: v is not null
                    ),
                    '; '
                ),
                ''
            )
        end as answer_text,
        answer_shape = 'options'
            or lower(field_type) in ('dropdown', 'checkbox')
            or len(field_options) > 0 as is_option_based
    from looked_up
),

named as (
    select
        answered.namespace_company_id,
        answered.company_id,
        company_names.company_name,
        answered.company_id = answered.namespace_company_id as is_own_company,
        company_type_id,
        version_number,
        is_current,
        valid_from as versioned_at,
        valid_to as superseded_at,
        form_id,
        form_label,
        form_position,
        field_id,
        field_label,
        field_position,
        field_type,
        answer_text is not null as is_answered,
        answer_text,
        case
            when answer_text is null then null
            when is_option_based
                then list_filter(
                    list_transform(answer_items, lambda item: item.id), lambda v: v is not null
                )
            else []::varchar[]
        end as selected_option_ids,
        case
            when answer_text is null then null
            when is_option_based
                then list_filter(
                    list_transform(answer_items, lambda item: item.value), lambda v: v is not null
                )
            else []::varchar[]
        end as selected_option_values,
        information as answer_json,
        synced_at,
        response_sha256
    from answered
    left join company_names
        on company_names.namespace_company_id = answered.namespace_company_id
        and company_names.company_id = answered.company_id
),

-- final: what this build made, and the rows built before of a company renamed since
{{ renamed_and_final(watermarks) }}

select * from final
