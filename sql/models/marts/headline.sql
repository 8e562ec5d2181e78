-- analytics.headline
-- Grain: one row: the warehouse as of the build. Key: none (always exactly one row).
-- The figures the demo, the HTML report and `diligence status` lead with. Counterparties
-- are the connections of the namespaces; a namespace's own company is never counted as
-- one: its documents are counted apart (own_*), as analysts filter `not is_own_company`.
-- Expiry is evaluated at the build's as_of, like analytics.document_expiry;
-- last_success_at names the sync the figures stand on (in a register as of a date, the
-- last successful sync at or before it).
with

namespaces as (
    select * from {{ ref('namespaces') }}
),

connections as (
    select * from {{ ref('connections') }}
),

completeness as (
    select * from {{ ref('questionnaire_completeness') }}
),

documents as (
    select * from {{ ref('document_expiry') }}
),

issues as (
    select * from {{ ref('sync_issues') }}
),

counterparty_questionnaires as (
    select
        count(*) as questionnaire_count,
        coalesce(sum(answered_fields), 0) as answered_field_count
    from completeness
    where not is_own_company
),

document_counts as (
    select
        count(*) filter (where not is_own_company) as document_count,
        count(*) filter (where not is_own_company and expiry_status = 'expired')
            as expired_document_count,
        count(*) filter (where not is_own_company and expiry_status = 'expiring')
            as expiring_document_count,
        count(*) filter (where is_own_company) as own_document_count,
        count(*) filter (where is_own_company and expiry_status = 'expired')
            as own_expired_document_count,
        count(*) filter (where is_own_company and expiry_status = 'expiring')
            as own_expiring_document_count
    from documents
),

final as (
    select
        cast((select count(*) from namespaces) as integer) as namespace_count,
        cast((select count(distinct company_id) from connections) as integer)
            as counterparty_count,
        cast((select count(*) from connections) as integer) as connection_count,
        cast(counterparty_questionnaires.questionnaire_count as integer) as questionnaire_count,
        cast(counterparty_questionnaires.answered_field_count as integer) as answered_field_count,
        cast(document_counts.document_count as integer) as document_count,
        cast(document_counts.expired_document_count as integer) as expired_document_count,
        cast(document_counts.expiring_document_count as integer) as expiring_document_count,
        cast(document_counts.own_document_count as integer) as own_document_count,
        cast(document_counts.own_expired_document_count as integer) as own_expired_document_count,
        cast(document_counts.own_expiring_document_count as integer)
            as own_expiring_document_count,
        cast((select count(*) from issues) as integer) as sync_issue_count,
        {{ expiring_within_days() }} as expiring_within_days,
        {{ as_of() }} as evaluated_at,
        (select max(last_success_at) from namespaces) as last_success_at
    from counterparty_questionnaires
    cross join document_counts
)

select * from final
