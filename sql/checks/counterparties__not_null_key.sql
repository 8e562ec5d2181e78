-- Key columns of analytics.counterparties are never NULL.
select *
from analytics.counterparties
where company_id is null
