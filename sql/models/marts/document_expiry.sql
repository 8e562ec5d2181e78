-- analytics.document_expiry
-- Grain: one row per current document per company type per company per namespace.
-- Key: (namespace_company_id, company_id, company_type_id, document_id).
-- Build parameters (dbt vars, see dbt_project.yml):
--   as_of                 TIMESTAMP, UTC: "now" (the build time unless given)
--   expiring_within_days  INTEGER, N (default 30)
--   time_zone             the zone whose calendar days count (default UTC)
-- Days are calendar days (sql/macros/expiry.sql): a document's expiry day is the date its
-- expiration timestamp carries as sent; the evaluation day is as_of's date in time_zone.
-- expiry_status: 'no_expiry' when the expiration date is missing, NULL or blank;
-- 'invalid_date' when it is present but does not parse (the text as sent is in
-- expiration_date_text: such a document may well have expired); 'expired' when its day
-- is before the evaluation day; 'expiring' from the evaluation day to N days after it;
-- else 'valid'.
-- days_until_expiry = expiry day - evaluation day, in days: 0 on the day itself,
-- negative exactly for 'expired', 0..N for 'expiring', > N for 'valid', NULL for
-- 'no_expiry'/'invalid_date'.
-- synced_at is the last sync that confirmed the document, versioned_at when it last
-- changed. A document whose access was withdrawn leaves this table; document_history
-- ends its version.
with

documents as (
    select * from {{ ref('stg_documents') }}
),

companies as (
    select * from {{ ref('stg_companies') }}
),

freshness as (
    select * from {{ ref('namespaces') }}
),

parameters as (
    select
        {{ as_of() }} as as_of,
        {{ expiring_within_days() }} as expiring_within_days
),

evaluated as (
    select
        documents.*,
        parameters.as_of,
        parameters.expiring_within_days,
        {{ days_until_expiry('documents.expiration_date', 'parameters.as_of') }}
            as days_until_expiry,
        {{ expiry_status(
            'documents.expiration_date',
            'documents.is_expiration_date_invalid',
            'parameters.as_of',
            'parameters.expiring_within_days',
        ) }} as expiry_status
    from documents
    cross join parameters
),

final as (
    select
        evaluated.namespace_company_id,
        evaluated.company_id,
        companies.company_name,
        evaluated.company_id = evaluated.namespace_company_id as is_own_company,
        evaluated.company_type_id,
        evaluated.document_id,
        evaluated.document_name,
        evaluated.category,
        evaluated.type,
        evaluated.issue_date,
        evaluated.expiration_date,
        evaluated.expiration_date_text,
        evaluated.days_until_expiry,
        evaluated.expiry_status,
        evaluated.as_of as evaluated_at,
        evaluated.expiring_within_days,
        evaluated.valid_from as versioned_at,
        greatest(evaluated.synced_at, evaluated.valid_from, freshness.last_success_at)
            as synced_at,
        evaluated.response_sha256
    from evaluated
    left join companies
        on companies.namespace_company_id = evaluated.namespace_company_id
        and companies.company_id = evaluated.company_id
    left join freshness
        on freshness.namespace_company_id = evaluated.namespace_company_id
)

select * from final
