-- Key of analytics.sync_runs is unique: offending rows are keys that occur more than once.
select sync_id, namespace_company_id, count(*) as occurrences
from analytics.sync_runs
group by sync_id, namespace_company_id
having count(*) > 1
