-- analytics.document_history
-- Grain: one row per kept version of a document per company type per company per
-- namespace (dlt scd2 history).
-- Key: (namespace_company_id, company_id, company_type_id, document_id, valid_from);
-- also unique: version_number.
-- A version ends (valid_to) when the document changed (end_reason 'changed': a newer
-- version starts at that time) or left the current state: end_reason from
-- stg_access_ends, 'access_withdrawn' (403, or the reading right on the company type was
-- withdrawn), 'not_found' (404), 'disconnected' (the company is no longer a connection)
-- or 'removed' (no longer listed). change_type says how a version began: 'added' (first
-- version), 'changed' or 'restored' (back after a time out of the current state).
-- Dates are parsed as in document_expiry (TIMESTAMPTZ, UTC; text kept in *_text).
-- Incremental (macros/incremental.sql): a build replaces the versions that started or
-- ended at a sync since the table's last build, and renames the rows of a company whose
-- name changed since.
{%- set watermarks = incremental_watermarks() %}
with

versions as (
    select * from {{ ref('stg_document_versions') }}
),

access_ends as (
    select * from {{ ref('stg_access_ends') }}
),

company_names as (
    select * from {{ ref('stg_company_names') }}
),
{%- if watermarks is not none %}

built as (
    select * from {{ this }}
),
{%- endif %}

with_neighbours as (
    select
        *,
        lag(valid_to) over document as previous_valid_to,
        lead(valid_from) over document as next_valid_from
    from versions
    window document as (
        partition by namespace_company_id, company_id, company_type_id, document_id
        order by version_number
    )
),

new_versions as (
    select * from with_neighbours
    where {{ is_after_watermark(watermarks, ['valid_from', 'valid_to']) }}
),

named as (
    select
        new_versions.namespace_company_id,
        new_versions.company_id,
        company_names.company_name,
        new_versions.company_id = new_versions.namespace_company_id as is_own_company,
        new_versions.company_type_id,
        new_versions.document_id,
        new_versions.version_number,
        new_versions.document_name,
        new_versions.category,
        new_versions.type,
        new_versions.issue_date,
        new_versions.issue_date_text,
        new_versions.expiration_date,
        new_versions.expiration_date_text,
        new_versions.is_expiration_date_invalid,
        new_versions.valid_from,
        new_versions.valid_to,
        new_versions.is_current,
        case
            when new_versions.version_number = 1 then 'added'
            when new_versions.previous_valid_to = new_versions.valid_from then 'changed'
            else 'restored'
        end as change_type,
        case
            when new_versions.valid_to is null then null
            when new_versions.next_valid_from = new_versions.valid_to then 'changed'
            else coalesce(access_ends.end_reason, 'removed')
        end as end_reason,
        new_versions.response_sha256
    from new_versions
    left join access_ends
        on access_ends.namespace_company_id = new_versions.namespace_company_id
        and access_ends.company_id = new_versions.company_id
        and access_ends.company_type_id = new_versions.company_type_id
        and access_ends.ended_at = new_versions.valid_to
    left join company_names
        on company_names.namespace_company_id = new_versions.namespace_company_id
        and company_names.company_id = new_versions.company_id
),

-- final: what this build made, and the rows built before of a company renamed since
{{ renamed_and_final(watermarks) }}

select * from final
