-- Key columns of analytics.freshness are never NULL.
select *
from analytics.freshness
where namespace_company_id is null
