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

final as (
    select
        with_neighbours.namespace_company_id,
        with_neighbours.company_id,
        company_names.company_name,
        with_neighbours.company_id = with_neighbours.namespace_company_id as is_own_company,
        with_neighbours.company_type_id,
        with_neighbours.document_id,
        with_neighbours.version_number,
        with_neighbours.document_name,
        with_neighbours.category,
        with_neighbours.type,
        with_neighbours.issue_date,
        with_neighbours.issue_date_text,
        with_neighbours.expiration_date,
        with_neighbours.expiration_date_text,
        with_neighbours.is_expiration_date_invalid,
        with_neighbours.valid_from,
        with_neighbours.valid_to,
        with_neighbours.is_current,
        case
            when with_neighbours.version_number = 1 then 'added'
            when with_neighbours.previous_valid_to = with_neighbours.valid_from then 'changed'
            else 'restored'
        end as change_type,
        case
            when with_neighbours.valid_to is null then null
            when with_neighbours.next_valid_from = with_neighbours.valid_to then 'changed'
            else coalesce(access_ends.end_reason, 'removed')
        end as end_reason,
        with_neighbours.response_sha256
    from with_neighbours
    left join access_ends
        on access_ends.namespace_company_id = with_neighbours.namespace_company_id
        and access_ends.company_id = with_neighbours.company_id
        and access_ends.company_type_id = with_neighbours.company_type_id
        and access_ends.ended_at = with_neighbours.valid_to
    left join company_names
        on company_names.namespace_company_id = with_neighbours.namespace_company_id
        and company_names.company_id = with_neighbours.company_id
)

select * from final
