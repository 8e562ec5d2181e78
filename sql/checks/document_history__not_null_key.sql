-- Key columns of analytics.document_history are never NULL.
select *
from analytics.document_history
where namespace_company_id is null or company_id is null or company_type_id is null
    or document_id is null or valid_from is null
