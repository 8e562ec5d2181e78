-- Key of analytics.document_expiry is unique: offending rows are keys that occur more than once.
select namespace_company_id, company_id, company_type_id, document_id, count(*) as occurrences
from analytics.document_expiry
group by namespace_company_id, company_id, company_type_id, document_id
having count(*) > 1
