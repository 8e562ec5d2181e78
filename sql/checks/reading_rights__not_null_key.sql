-- Key columns of analytics.reading_rights are never NULL: offending rows have a NULL key part.
select *
from analytics.reading_rights
where namespace_company_id is null or company_id is null or company_type_id is null or direction is null
