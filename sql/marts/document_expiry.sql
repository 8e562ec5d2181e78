-- analytics.document_expiry
-- Grain: one row per current document per company type per company per namespace.
-- Key: (namespace_company_id, company_id, company_type_id, document_id).
-- Build parameters (DuckDB variables set by diligence/models.py):
--   as_of                 TIMESTAMP, UTC: "now" (the build time unless given)
--   expiring_within_days  INTEGER, N (default 30)
-- expiry_status: 'no_expiry' when the expiration date is missing, NULL or blank;
-- 'invalid_date' when it is present but does not parse (the text as sent is in
-- expiration_date_text: such a document may well have expired); 'expired' when
-- expiration_date < as_of; 'expiring' when as_of <= expiration_date <= as_of + N days;
-- else 'valid'.
-- days_until_expiry = floor((expiration_date - as_of) / 24 h): negative exactly for
-- 'expired', 0..N for 'expiring', >= N for 'valid', NULL for 'no_expiry'/'invalid_date'.
-- synced_at is the last sync that confirmed the document, versioned_at when it last
-- changed. A document whose access was withdrawn leaves this table; document_history
-- ends its version.
--
-- Columns:
-- - company_name: Name of the company (from its company details; NULL when unread).
-- - is_own_company: True when the document belongs to the namespace's own company.
-- - document_name: File name of the document.
-- - category: Document category as the service sends it.
-- - type: Document type as the service sends it.
-- - issue_date: Issue date (TIMESTAMPTZ, UTC; a date without zone is read as UTC).
-- - expiration_date: Expiration date (TIMESTAMPTZ, UTC; a date without zone is read as
--   UTC); NULL when missing or unparseable.
-- - expiration_date_text: The expiration date exactly as the service sent it.
-- - days_until_expiry: Whole days from evaluated_at to expiration_date (floor).
-- - expiry_status: 'expired', 'expiring', 'valid', 'no_expiry' or 'invalid_date'.
-- - evaluated_at: The "now" the status was computed at (as_of, TIMESTAMPTZ, UTC).
-- - expiring_within_days: The window N of 'expiring', in days.
-- - versioned_at: When this version of the document was first seen (TIMESTAMPTZ, UTC).
with

documents as (
    select * from staging.stg_documents
),

companies as (
    select * from staging.stg_companies
),

freshness as (
    select * from analytics.freshness
),

parameters as (
    select
        timezone('UTC', cast(getvariable('as_of') as timestamp)) as as_of,
        cast(getvariable('expiring_within_days') as integer) as expiring_within_days
),

evaluated as (
    select
        documents.*,
        parameters.as_of,
        parameters.expiring_within_days,
        cast(
            floor(
                (epoch_us(documents.expiration_date) - epoch_us(parameters.as_of))
                / 86400000000.0
            ) as integer
        ) as days_until_expiry,
        case
            when documents.is_expiration_date_invalid then 'invalid_date'
            when documents.expiration_date is null then 'no_expiry'
            when documents.expiration_date < parameters.as_of then 'expired'
            when documents.expiration_date
                <= parameters.as_of + to_days(parameters.expiring_within_days) then 'expiring'
            else 'valid'
        end as expiry_status
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
            as synced_at
    from evaluated
    left join companies
        on companies.namespace_company_id = evaluated.namespace_company_id
        and companies.company_id = evaluated.company_id
    left join freshness
        on freshness.namespace_company_id = evaluated.namespace_company_id
)

select * from final
