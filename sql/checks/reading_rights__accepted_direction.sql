-- direction is 'given' or 'received'.
select *
from analytics.reading_rights
where direction is null or direction not in ('given', 'received')
