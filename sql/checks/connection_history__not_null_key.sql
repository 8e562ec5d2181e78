-- Key columns of analytics.connection_history are never NULL.
select *
from analytics.connection_history
where namespace_company_id is null or company_id is null or valid_from is null
