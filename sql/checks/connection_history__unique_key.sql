-- Key of analytics.connection_history is unique: offending rows are keys that occur more than once.
select namespace_company_id, company_id, valid_from, count(*) as occurrences
from analytics.connection_history
group by namespace_company_id, company_id, valid_from
having count(*) > 1
