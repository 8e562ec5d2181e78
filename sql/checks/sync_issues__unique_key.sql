-- One row per request of the latest sync: offending rows are requests listed more than once.
select namespace_company_id, endpoint, company_id, company_type_id, count(*) as occurrences
from analytics.sync_issues
group by namespace_company_id, endpoint, company_id, company_type_id
having count(*) > 1
