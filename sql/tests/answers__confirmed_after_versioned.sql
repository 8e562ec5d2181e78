-- A current answer was confirmed no earlier than its content last changed:
-- versioned_at <= synced_at.
select *
from {{ ref('answers') }}
where synced_at is null or versioned_at is null or synced_at < versioned_at
