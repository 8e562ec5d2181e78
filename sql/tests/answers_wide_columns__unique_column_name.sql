-- Every answers_wide field column has its own name: offending rows share a column_name.
select column_name, count(*) as occurrences
from {{ ref('answers_wide_columns') }}
group by column_name
having count(*) > 1
