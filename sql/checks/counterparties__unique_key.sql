-- Key of analytics.counterparties is unique: offending rows are keys that occur more than once.
select company_id, count(*) as occurrences
from analytics.counterparties
group by company_id
having count(*) > 1
