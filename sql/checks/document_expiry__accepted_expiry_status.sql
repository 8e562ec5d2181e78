-- expiry_status is one of the four accepted values and agrees with expiration_date.
select *
from analytics.document_expiry
where expiry_status is null
    or expiry_status not in ('expired', 'expiring', 'valid', 'no_expiry')
    or (expiry_status = 'no_expiry') <> (expiration_date is null)
