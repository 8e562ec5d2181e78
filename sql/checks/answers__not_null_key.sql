-- Key columns of analytics.answers are never NULL: offending rows have a NULL key part.
select *
from analytics.answers
where namespace_company_id is null or company_id is null or company_type_id is null or field_id is null
