-- Key of analytics.connections is unique: offending rows are keys that occur more than once.
select namespace_company_id, company_id, count(*) as occurrences
from analytics.connections
group by namespace_company_id, company_id
having count(*) > 1
