-- change_type is one of the accepted values, and the sides agree with it: a questionnaire
-- that left the current state has no new answer, a restored one no old answer.
select *
from {{ ref('answer_changes') }}
where change_type is null
    or change_type not in (
        'answered', 'cleared', 'changed', 'field_added', 'field_removed',
        'access_withdrawn', 'not_found', 'disconnected', 'removed', 'restored'
    )
    or (
        change_type in ('access_withdrawn', 'not_found', 'disconnected', 'removed')
        and (new_answer_text is not null or new_version_number is not null)
    )
    or (change_type = 'restored' and (old_answer_text is not null or old_version_number is not null))
