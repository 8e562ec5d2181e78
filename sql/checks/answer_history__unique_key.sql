-- Key of analytics.answer_history is unique: offending rows are keys that occur more than once.
select namespace_company_id, company_id, company_type_id, version_number, field_id, count(*) as occurrences
from analytics.answer_history
group by namespace_company_id, company_id, company_type_id, version_number, field_id
having count(*) > 1
