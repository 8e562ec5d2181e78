-- Label fields carry no answer and are not in answers.
select *
from analytics.answers
where lower(field_type) = 'label'
