-- completeness_pct is between 0 and 100, and NULL exactly when nothing is answerable.
select *
from {{ ref('questionnaire_completeness') }}
where completeness_pct < 0
    or completeness_pct > 100
    or (completeness_pct is null) <> (answerable_fields = 0)
