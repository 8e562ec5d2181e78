-- analytics.answers
-- Grain: one row per answerable (non-Label) field of every current questionnaire.
-- Key: (namespace_company_id, company_id, company_type_id, field_id).
-- company_name comes from the namespace's company details; NULL when they could not be
-- read. Answer columns are derived in answer_history (see its header).
-- synced_at is the last sync that confirmed the row (the namespace's last successful
-- sync), versioned_at when the questionnaire's answers last changed.
-- A questionnaire whose access was withdrawn (403/404), or whose company is no longer a
-- connection, leaves this table; answer_history and answer_changes keep what it said.
with

answer_history as (
    select * from {{ ref('answer_history') }}
),

companies as (
    select * from {{ ref('stg_companies') }}
),

freshness as (
    select * from {{ ref('namespaces') }}
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
        current_answers.company_id = current_answers.namespace_company_id as is_own_company,
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
        greatest(current_answers.synced_at, freshness.last_success_at) as synced_at,
        current_answers.response_sha256
    from current_answers
    left join companies
        on companies.namespace_company_id = current_answers.namespace_company_id
        and companies.company_id = current_answers.company_id
    left join freshness
        on freshness.namespace_company_id = current_answers.namespace_company_id
)

select * from final
