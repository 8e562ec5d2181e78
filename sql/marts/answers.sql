-- analytics.answers
-- Grain: one row per answerable (non-Label) field of every current questionnaire.
-- Key: (namespace_company_id, company_id, company_type_id, field_id).
-- company_name comes from the namespace's company details; NULL when they could not be
-- read. Answer columns are derived in answer_history (see its header).
with

answer_history as (
    select * from analytics.answer_history
),

companies as (
    select * from staging.stg_companies
),

current_answers as (
    select * from answer_history
    where is_current
),

final as (
    select
        current_answers.namespace_company_id,
        current_answers.company_id,
        companies.company_name,
        current_answers.company_type_id,
        current_answers.form_id,
        current_answers.form_label,
        current_answers.field_id,
        current_answers.field_label,
        current_answers.field_type,
        current_answers.is_answered,
        current_answers.answer_text,
        current_answers.selected_option_ids,
        current_answers.selected_option_values,
        current_answers.answer_json,
        current_answers.form_position,
        current_answers.field_position,
        current_answers.version_number,
        current_answers.versioned_at,
        current_answers.synced_at
    from current_answers
    left join companies
        on companies.namespace_company_id = current_answers.namespace_company_id
        and companies.company_id = current_answers.company_id
)

select * from final
