-- Label fields carry no answer and are not in answers.
select *
from {{ ref('answers') }}
where lower(field_type) = 'label'
