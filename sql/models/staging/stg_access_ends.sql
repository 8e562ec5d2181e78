-- staging.stg_access_ends
-- Grain: one row per (namespace, company, company type, ended_at) at which a
-- questionnaire or a document of that company type left the current state: a version
-- that ended with no version of the same item starting then (a version replaced by a
-- newer one is no access end: the marts call that 'changed').
-- Key: (namespace_company_id, company_id, company_type_id, ended_at).
-- A table, built once per build and read by answer_changes and document_history.
-- end_reason says why the sync at ended_at no longer had the item:
--   'access_withdrawn'  the request was denied (403 in sync_issues of that sync), or the
--                       connection no longer gave the namespace reading rights on the type
--   'not_found'         the request answered 404 (in sync_issues of that sync)
--   'disconnected'      the company was no longer a connection of the namespace
--   'removed'           otherwise: still readable, but the item was no longer listed
-- The namespace's own company is never 'disconnected'.
with

questionnaire_versions as (
    select * from {{ ref('stg_questionnaire_versions') }}
),

document_versions as (
    select * from {{ ref('stg_document_versions') }}
),

connection_versions as (
    select * from {{ ref('stg_connection_versions') }}
),

issues as (
    select * from {{ ref('stg_sync_issues') }}
),

questionnaire_ends as (
    select
        namespace_company_id,
        company_id,
        company_type_id,
        valid_to as ended_at,
        lead(valid_from) over (
            partition by namespace_company_id, company_id, company_type_id
            order by version_number
        ) as next_valid_from
    from questionnaire_versions
),

document_ends as (
    select
        namespace_company_id,
        company_id,
        company_type_id,
        valid_to as ended_at,
        lead(valid_from) over (
            partition by namespace_company_id, company_id, company_type_id, document_id
            order by version_number
        ) as next_valid_from
    from document_versions
),

ends as (
    select namespace_company_id, company_id, company_type_id, ended_at
    from questionnaire_ends
    where ended_at is not null and next_valid_from is distinct from ended_at
    union
    select namespace_company_id, company_id, company_type_id, ended_at
    from document_ends
    where ended_at is not null and next_valid_from is distinct from ended_at
),

denials as (
    select
        namespace_company_id,
        company_id,
        company_type_id,
        synced_at,
        bool_or(http_status = 403) as is_forbidden,
        bool_or(http_status = 404) as is_not_found
    from issues
    where http_status in (403, 404) and company_type_id is not null
    group by all
),

-- the connection version in effect at each end (an equality join on the company, then
-- the time; without scd2 history, the older raw shape, a current connection counts as
-- always there)
connection_at_end as (
    select
        ends.namespace_company_id,
        ends.company_id,
        ends.company_type_id,
        ends.ended_at,
        connection_versions.received_company_type_ids
    from ends
    join connection_versions
        on connection_versions.namespace_company_id = ends.namespace_company_id
        and connection_versions.company_id = ends.company_id
    where (connection_versions.valid_from <= ends.ended_at or not connection_versions.is_history_kept)
        and (connection_versions.valid_to is null or connection_versions.valid_to > ends.ended_at)
    qualify row_number() over (
        partition by ends.namespace_company_id, ends.company_id, ends.company_type_id, ends.ended_at
        order by connection_versions.valid_from desc
    ) = 1
),

final as (
    select
        ends.namespace_company_id,
        ends.company_id,
        ends.company_type_id,
        ends.ended_at,
        case
            when denials.is_forbidden then 'access_withdrawn'
            when denials.is_not_found then 'not_found'
            when ends.company_id <> ends.namespace_company_id
                and connection_at_end.company_id is null then 'disconnected'
            when ends.company_id <> ends.namespace_company_id
                and not list_contains(
                    connection_at_end.received_company_type_ids, ends.company_type_id
                ) then 'access_withdrawn'
            else 'removed'
        end as end_reason
    from ends
    left join connection_at_end
        on connection_at_end.namespace_company_id = ends.namespace_company_id
        and connection_at_end.company_id = ends.company_id
        and connection_at_end.company_type_id = ends.company_type_id
        and connection_at_end.ended_at = ends.ended_at
    left join denials
        on denials.namespace_company_id = ends.namespace_company_id
        and denials.company_id = ends.company_id
        and denials.company_type_id = ends.company_type_id
        and denials.synced_at = ends.ended_at
)

select * from final
