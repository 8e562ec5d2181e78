-- Key columns of analytics.connections are never NULL: offending rows have a NULL key part.
select *
from analytics.connections
where namespace_company_id is null or company_id is null
