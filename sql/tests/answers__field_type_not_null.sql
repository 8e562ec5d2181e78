-- Every answer has a field_type (unknown types pass through, but a type is always given).
select *
from {{ ref('answers') }}
where field_type is null
