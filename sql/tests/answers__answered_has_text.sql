-- is_answered is true exactly when answer_text is not NULL.
select *
from {{ ref('answers') }}
where is_answered is null or is_answered <> (answer_text is not null)
