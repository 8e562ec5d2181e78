-- Key columns of analytics.questionnaire_completeness are never NULL: offending rows have a NULL key part.
select *
from analytics.questionnaire_completeness
where namespace_company_id is null or company_id is null or company_type_id is null
