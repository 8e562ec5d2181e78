-- staging.stg_company_names
-- Grain: one row per company ever seen by a namespace (its own company, a connection, or
-- a company whose details were read), current or not.
-- Key: (namespace_company_id, company_id).
-- company_name is the latest known name: from the latest version of the company details
-- when they were ever read, else from the latest version of the connection list/detail.
-- So a disconnected company keeps its name in the history marts.
-- name_changed_at: the latest valid_from of those versions (the name can only have
-- changed then); the incremental history marts rename a company's rows from it.
with

company_versions as (
    select * from {{ ref('stg_company_versions') }}
),

connection_versions as (
    select * from {{ ref('stg_connection_versions') }}
),

detail_names as (
    select
        namespace_company_id,
        company_id,
        arg_max(company_name, version_number) as company_name,
        max(valid_from) as name_changed_at
    from company_versions
    group by namespace_company_id, company_id
),

listed_names as (
    select
        namespace_company_id,
        company_id,
        arg_max(company_name, version_number) as company_name,
        max(valid_from) as name_changed_at
    from connection_versions
    group by namespace_company_id, company_id
),

final as (
    select
        coalesce(detail_names.namespace_company_id, listed_names.namespace_company_id)
            as namespace_company_id,
        coalesce(detail_names.company_id, listed_names.company_id) as company_id,
        coalesce(detail_names.company_name, listed_names.company_name) as company_name,
        greatest(detail_names.name_changed_at, listed_names.name_changed_at) as name_changed_at
    from detail_names
    full outer join listed_names
        on listed_names.namespace_company_id = detail_names.namespace_company_id
        and listed_names.company_id = detail_names.company_id
)

select * from final
