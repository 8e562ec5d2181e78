-- Key columns of analytics.document_expiry are never NULL: offending rows have a NULL key part.
select *
from analytics.document_expiry
where namespace_company_id is null or company_id is null or company_type_id is null or document_id is null
