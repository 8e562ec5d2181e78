-- Key columns of analytics.answers_wide are never NULL: offending rows have a NULL key part.
select *
from analytics.answers_wide
where namespace_company_id is null or company_id is null or company_type_id is null
