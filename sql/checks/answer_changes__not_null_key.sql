-- Key columns of analytics.answer_changes are never NULL: offending rows have a NULL key part.
select *
from analytics.answer_changes
where namespace_company_id is null or company_id is null or company_type_id is null or field_id is null or changed_at is null
