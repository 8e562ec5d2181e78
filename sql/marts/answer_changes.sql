-- analytics.answer_changes
-- Grain: one row per field whose answer_text differs between two consecutive kept
-- versions of a questionnaire.
-- Key: (namespace_company_id, company_id, company_type_id, field_id, changed_at).
-- A field absent from a version counts as unanswered there, so a field that appears
-- answered, disappears while answered, becomes answered or becomes unanswered is a
-- change with NULL on one side; a field that appears or disappears unanswered is not.
-- changed_at is the new version's valid_from. change_type: 'answered', 'cleared',
-- 'changed', 'field_added', 'field_removed'.
with

versions as (
    select * from staging.stg_questionnaire_versions
),

answer_history as (
    select * from analytics.answer_history
),

version_pairs as (
    select
        namespace_company_id,
        company_id,
        company_type_id,
        lag(version_number) over questionnaire as old_version_number,
        version_number as new_version_number,
        valid_from as changed_at
    from versions
    window questionnaire as (
        partition by namespace_company_id, company_id, company_type_id
        order by version_number
    )
),

consecutive_pairs as (
    select * from version_pairs
    where old_version_number is not null
),

old_fields as (
    select
        consecutive_pairs.*,
        answer_history.form_id,
        answer_history.field_id,
        answer_history.field_label,
        answer_history.answer_text
    from consecutive_pairs
    join answer_history
        on answer_history.namespace_company_id = consecutive_pairs.namespace_company_id
        and answer_history.company_id = consecutive_pairs.company_id
        and answer_history.company_type_id = consecutive_pairs.company_type_id
        and answer_history.version_number = consecutive_pairs.old_version_number
),

new_fields as (
    select
        consecutive_pairs.*,
        answer_history.form_id,
        answer_history.field_id,
        answer_history.field_label,
        answer_history.answer_text
    from consecutive_pairs
    join answer_history
        on answer_history.namespace_company_id = consecutive_pairs.namespace_company_id
        and answer_history.company_id = consecutive_pairs.company_id
        and answer_history.company_type_id = consecutive_pairs.company_type_id
        and answer_history.version_number = consecutive_pairs.new_version_number
),

compared as (
    select
        coalesce(new_fields.namespace_company_id, old_fields.namespace_company_id)
            as namespace_company_id,
        coalesce(new_fields.company_id, old_fields.company_id) as company_id,
        coalesce(new_fields.company_type_id, old_fields.company_type_id) as company_type_id,
        coalesce(new_fields.form_id, old_fields.form_id) as form_id,
        coalesce(new_fields.field_id, old_fields.field_id) as field_id,
        coalesce(new_fields.field_label, old_fields.field_label) as field_label,
        old_fields.answer_text as old_answer_text,
        new_fields.answer_text as new_answer_text,
        case
            when old_fields.field_id is null then 'field_added'
            when new_fields.field_id is null then 'field_removed'
            when old_fields.answer_text is null then 'answered'
            when new_fields.answer_text is null then 'cleared'
            else 'changed'
        end as change_type,
        coalesce(new_fields.old_version_number, old_fields.old_version_number)
            as old_version_number,
        coalesce(new_fields.new_version_number, old_fields.new_version_number)
            as new_version_number,
        coalesce(new_fields.changed_at, old_fields.changed_at) as changed_at
    from old_fields
    full outer join new_fields
        on new_fields.namespace_company_id = old_fields.namespace_company_id
        and new_fields.company_id = old_fields.company_id
        and new_fields.company_type_id = old_fields.company_type_id
        and new_fields.new_version_number = old_fields.new_version_number
        and new_fields.field_id = old_fields.field_id
),

final as (
    select * from compared
    where old_answer_text is distinct from new_answer_text
)

select * from final
