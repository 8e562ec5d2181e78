-- Key of analytics.answers_wide_columns is unique: offending rows are keys that occur more than once.
select field_id, count(*) as occurrences
from analytics.answers_wide_columns
group by field_id
having count(*) > 1
