-- What did this counterparty answer, field by field, and what changed?
-- One row per field of each current questionnaire of the counterparty (per namespace it
-- is connected through and company type), with its last change and the answer before it.
-- Set the counterparty first (all counterparties when unset):
--   set variable company_id = 'c1';
select
    counterparties.company_name,
    answers.namespace_company_id,
    answers.company_type_id,
    answers.form_label,
    answers.field_label,
    answers.answer_text,
    answers.versioned_at as questionnaire_changed_at,
    answers.synced_at as confirmed_at,
    last_changes.changed_at as last_changed_at,
    last_changes.change_type as last_change_type,
    last_changes.old_answer_text as previous_answer_text
from analytics.answers
join analytics.counterparties
    on counterparties.company_id = answers.company_id
left join (
    select *
    from analytics.answer_changes
    qualify row_number() over (
        partition by namespace_company_id, company_id, company_type_id, field_id
        order by changed_at desc
    ) = 1
) as last_changes
    on last_changes.namespace_company_id = answers.namespace_company_id
    and last_changes.company_id = answers.company_id
    and last_changes.company_type_id = answers.company_type_id
    and last_changes.field_id = answers.field_id
where not answers.is_own_company
    and (getvariable('company_id') is null or answers.company_id = getvariable('company_id'))
order by
    counterparties.company_name,
    answers.company_id,
    answers.namespace_company_id,
    answers.company_type_id,
    answers.form_position,
    answers.field_position;
