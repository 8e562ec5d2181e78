-- Key of analytics.reading_rights is unique: offending rows are keys that occur more than once.
select namespace_company_id, company_id, company_type_id, direction, count(*) as occurrences
from analytics.reading_rights
group by namespace_company_id, company_id, company_type_id, direction
having count(*) > 1
