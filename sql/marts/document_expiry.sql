-- analytics.document_expiry
-- Grain: one row per current document per company type per company per namespace.
-- Key: (namespace_company_id, company_id, company_type_id, document_id).
-- Build parameters (DuckDB variables set by diligence/models.py):
--   as_of                 TIMESTAMP, UTC: "now" (the build time unless given)
--   expiring_within_days  INTEGER, N (default 30)
-- expiry_status: 'no_expiry' when expiration_date is NULL (missing or unparseable),
-- 'expired' when expiration_date < as_of, 'expiring' when
-- as_of <= expiration_date <= as_of + N days, else 'valid'.
-- days_until_expiry = floor((expiration_date - as_of) / 24 h): negative exactly for
-- 'expired', 0..N for 'expiring', >= N for 'valid', NULL for 'no_expiry'.
with

documents as (
    select * from staging.stg_documents
),

companies as (
    select * from staging.stg_companies
),

parameters as (
    select
        cast(getvariable('as_of') as timestamp) as as_of,
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
        evaluated.company_type_id,
        evaluated.document_id,
        evaluated.document_name,
        evaluated.category,
        evaluated.type,
        evaluated.issue_date,
        evaluated.expiration_date,
        evaluated.days_until_expiry,
        evaluated.expiry_status,
        evaluated.as_of as evaluated_at,
        evaluated.expiring_within_days,
        evaluated.synced_at
    from evaluated
    left join companies
        on companies.namespace_company_id = evaluated.namespace_company_id
        and companies.company_id = evaluated.company_id
)

select * from final
