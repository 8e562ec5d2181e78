-- is_connected agrees with namespace_company_ids and disconnected_at: a connected
-- counterparty has namespaces and no disconnected_at, a disconnected one the opposite;
-- first_seen_at <= last_seen_at.
select *
from {{ ref('counterparties') }}
where is_connected is null
    or is_connected <> (len(namespace_company_ids) > 0)
    or is_connected <> (disconnected_at is null)
    or first_seen_at > last_seen_at
