-- staging.stg_user_roles
-- Grain: one row per namespace (the user's roles in that company, current state).
-- Key: namespace_company_id.
with

source as (
    select * from {{ raw_source('user_roles') }}
),

final as (
    select
        namespace_company_id,
        coalesce(cast(internal_names as varchar[]), []) as internal_role_names,
        coalesce(cast(internal_company_type_ids as varchar[]), []) as internal_company_type_ids,
        coalesce(cast(external_names as varchar[]), []) as external_role_names,
        coalesce(cast(external_company_type_ids as varchar[]), []) as external_company_type_ids,
        synced_at,
        response_sha256
    from source
)

select * from final
