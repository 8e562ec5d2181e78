-- staging.stg_document_versions
-- Grain: one row per kept version of a document per company type per company per
-- namespace (dlt scd2 history).
-- Key: (namespace_company_id, company_id, company_type_id, document_id, version_number);
-- version_number counts 1, 2, ... in order of valid_from.
-- Dates: the service sends 'YYYY-MM-DDTHH:MM:SS' with no zone; it is read as UTC into a
-- TIMESTAMPTZ. A value carrying an explicit offset ('Z', '+02:00') keeps its instant.
-- The text as sent is kept in *_text; *_is_invalid is true when that text is present
-- (not NULL, not blank) but does not parse (the date is then NULL).
with

source as (
    select * from {{ raw_source('documents') }}
),

parsed as (
    select
        *,
        nullif(trim(issue_date), '') as issue_date_trimmed,
        nullif(trim(expiration_date), '') as expiration_date_trimmed
    from source
),

dated as (
    select
        namespace_company_id,
        company_id,
        company_type_id,
        document_id,
        row_number() over (
            partition by namespace_company_id, company_id, company_type_id, document_id
            order by _dlt_valid_from, content_hash
        ) as version_number,
        name as document_name,
        category,
        type,
        case
            when regexp_matches(
                issue_date_trimmed, '[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?\s*(Z|[+-]\d{2}(:?\d{2})?)$'
            ) then try_cast(issue_date_trimmed as timestamptz)
            else timezone('UTC', try_cast(issue_date_trimmed as timestamp))
        end as issue_date,
        case
            when regexp_matches(
                expiration_date_trimmed,
                '[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?\s*(Z|[+-]\d{2}(:?\d{2})?)$'
            ) then try_cast(expiration_date_trimmed as timestamptz)
            else timezone('UTC', try_cast(expiration_date_trimmed as timestamp))
        end as expiration_date,
        issue_date as issue_date_text,
        expiration_date as expiration_date_text,
        expiration_date_trimmed is not null as has_expiration_text,
        document_json,
        content_hash,
        response_sha256,
        _dlt_valid_from as valid_from,
        _dlt_valid_to as valid_to,
        _dlt_valid_to is null as is_current,
        synced_at
    from parsed
),

final as (
    select
        * exclude (has_expiration_text),
        has_expiration_text and expiration_date is null as is_expiration_date_invalid
    from dated
)

select * from final
