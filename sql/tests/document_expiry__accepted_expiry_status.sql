-- expiry_status is one of the five accepted values and agrees with expiration_date:
-- NULL exactly for 'no_expiry' and 'invalid_date', and 'invalid_date' keeps its text.
select *
from {{ ref('document_expiry') }}
where expiry_status is null
    or expiry_status not in ('expired', 'expiring', 'valid', 'no_expiry', 'invalid_date')
    or (expiry_status in ('no_expiry', 'invalid_date')) <> (expiration_date is null)
    or (expiry_status = 'invalid_date' and expiration_date_text is null)
