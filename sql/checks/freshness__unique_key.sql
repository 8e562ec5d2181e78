-- Key of analytics.freshness is unique: offending rows are namespaces listed more than once.
select namespace_company_id, count(*) as occurrences
from analytics.freshness
group by namespace_company_id
having count(*) > 1
