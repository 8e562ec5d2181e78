-- Every listed change changes something: old and new answer_text differ.
select *
from {{ ref('answer_changes') }}
where old_answer_text is not distinct from new_answer_text
