-- Key of analytics.answers is unique: offending rows are keys that occur more than once.
select namespace_company_id, company_id, company_type_id, field_id, count(*) as occurrences
from analytics.answers
group by namespace_company_id, company_id, company_type_id, field_id
having count(*) > 1
