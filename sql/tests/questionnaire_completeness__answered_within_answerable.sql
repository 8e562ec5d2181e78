-- 0 <= answered_fields <= answerable_fields.
select *
from {{ ref('questionnaire_completeness') }}
where answered_fields is null
    or answerable_fields is null
    or answered_fields < 0
    or answered_fields > answerable_fields
