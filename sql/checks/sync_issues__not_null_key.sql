-- Every sync issue names its namespace and endpoint (company_id and company_type_id are
-- NULL for requests that are not about one company or company type).
select *
from analytics.sync_issues
where namespace_company_id is null or endpoint is null
