-- Key columns of analytics.sync_runs are never NULL.
select *
from analytics.sync_runs
where sync_id is null or namespace_company_id is null or synced_at is null
