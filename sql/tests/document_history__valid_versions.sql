-- Versions are well formed: valid_from < valid_to, is_current exactly when valid_to is
-- NULL, end_reason set exactly when the version ended, accepted change and end values.
select *
from {{ ref('document_history') }}
where valid_to <= valid_from
    or is_current is null
    or is_current <> (valid_to is null)
    or (end_reason is null) <> (valid_to is null)
    or change_type not in ('added', 'changed', 'restored')
    or end_reason not in ('changed', 'access_withdrawn', 'not_found', 'disconnected', 'removed')
