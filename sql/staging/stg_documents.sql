-- staging.stg_documents
-- Grain: one row per current document (the scd2 version with no valid_to) per company
-- type per company per namespace.
-- Key: (namespace_company_id, company_id, company_type_id, document_id).
-- Dates: the service sends 'YYYY-MM-DDTHH:MM:SS' with no zone; it is read as UTC into
-- a TIMESTAMP. A value carrying an explicit offset ('Z', '+02:00') is converted to UTC.
-- A value that does not parse becomes NULL; the text is kept in *_text.
with

source as (
    select * from {{ source('documents') }}
),

current_versions as (
    select * from source
    where _dlt_valid_to is null
),

final as (
    select
        namespace_company_id,
        company_id,
        company_type_id,
        document_id,
        name as document_name,
        category,
        type,
        case
            when regexp_matches(trim(issue_date), '[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?\s*(Z|[+-]\d{2}(:?\d{2})?)$')
                then timezone('UTC', try_cast(trim(issue_date) as timestamptz))
            else try_cast(trim(issue_date) as timestamp)
        end as issue_date,
        case
            when regexp_matches(trim(expiration_date), '[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?\s*(Z|[+-]\d{2}(:?\d{2})?)$')
                then timezone('UTC', try_cast(trim(expiration_date) as timestamptz))
            else try_cast(trim(expiration_date) as timestamp)
        end as expiration_date,
        issue_date as issue_date_text,
        expiration_date as expiration_date_text,
        document_json,
        content_hash,
        _dlt_valid_from as valid_from,
        synced_at
    from current_versions
)

select * from final
