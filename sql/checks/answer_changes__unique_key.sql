-- Key of analytics.answer_changes is unique: offending rows are keys that occur more than once.
select namespace_company_id, company_id, company_type_id, field_id, changed_at, count(*) as occurrences
from analytics.answer_changes
group by namespace_company_id, company_id, company_type_id, field_id, changed_at
having count(*) > 1
