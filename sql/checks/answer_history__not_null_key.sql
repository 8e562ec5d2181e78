-- Key columns of analytics.answer_history are never NULL: offending rows have a NULL key part.
select *
from analytics.answer_history
where namespace_company_id is null or company_id is null or company_type_id is null or version_number is null or field_id is null
