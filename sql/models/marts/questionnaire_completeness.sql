-- analytics.questionnaire_completeness
-- Grain: one row per current questionnaire.
-- Key: (namespace_company_id, company_id, company_type_id).
-- answerable_fields counts non-Label fields, answered_fields those with an answer;
-- completeness_pct = 100 * answered / answerable rounded to 1 decimal, NULL when the
-- questionnaire has no answerable field. synced_at is the last sync that confirmed the
-- questionnaire, versioned_at when its answers last changed.
with

questionnaires as (
    select * from {{ ref('stg_questionnaires') }}
),

companies as (
    select * from {{ ref('stg_companies') }}
),

answers as (
    select * from {{ ref('answers') }}
),

freshness as (
    select * from {{ ref('namespaces') }}
),

field_counts as (
    select
        namespace_company_id,
        company_id,
        company_type_id,
        count(*) as answerable_fields,
        count(*) filter (where is_answered) as answered_fields
    from answers
    group by all
),

final as (
    select
        questionnaires.namespace_company_id,
        questionnaires.company_id,
        companies.company_name,
        questionnaires.company_id = questionnaires.namespace_company_id as is_own_company,
        questionnaires.company_type_id,
        cast(coalesce(field_counts.answerable_fields, 0) as integer) as answerable_fields,
        cast(coalesce(field_counts.answered_fields, 0) as integer) as answered_fields,
        case
            when field_counts.answerable_fields > 0
                then round(100.0 * field_counts.answered_fields / field_counts.answerable_fields, 1)
        end as completeness_pct,
        questionnaires.version_number,
        questionnaires.valid_from as versioned_at,
        greatest(questionnaires.synced_at, freshness.last_success_at) as synced_at,
        questionnaires.response_sha256
    from questionnaires
    left join field_counts
        on field_counts.namespace_company_id = questionnaires.namespace_company_id
        and field_counts.company_id = questionnaires.company_id
        and field_counts.company_type_id = questionnaires.company_type_id
    left join companies
        on companies.namespace_company_id = questionnaires.namespace_company_id
        and companies.company_id = questionnaires.company_id
    left join freshness
        on freshness.namespace_company_id = questionnaires.namespace_company_id
)

select * from final
