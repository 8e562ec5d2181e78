-- Key columns of analytics.answers_wide_columns are never NULL.
select *
from analytics.answers_wide_columns
where field_id is null or column_name is null or column_position is null
