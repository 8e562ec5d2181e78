-- Key of analytics.questionnaire_completeness is unique: offending rows are keys that occur more than once.
select namespace_company_id, company_id, company_type_id, count(*) as occurrences
from analytics.questionnaire_completeness
group by namespace_company_id, company_id, company_type_id
having count(*) > 1
