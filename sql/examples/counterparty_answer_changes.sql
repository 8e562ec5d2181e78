-- What changed in this counterparty's answers? Every change, newest first, including
-- answers that left the current tables (access withdrawn, disconnected, removed) and
-- came back ('restored').
-- Set the counterparty first (all counterparties when unset):
--   set variable company_id = 'c1';
select
    changed_at,
    company_name,
    namespace_company_id,
    company_type_id,
    form_label,
    field_label,
    change_type,
    old_answer_text,
    new_answer_text
from analytics.answer_changes
where not is_own_company
    and (getvariable('company_id') is null or company_id = getvariable('company_id'))
order by changed_at desc, company_name, company_id, namespace_company_id, company_type_id, field_id;
