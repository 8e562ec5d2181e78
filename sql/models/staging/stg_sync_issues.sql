-- staging.stg_sync_issues
-- Grain: one row per denied (403/404) or failed request of each sync, all syncs.
-- Key: (sync_id, namespace_company_id, endpoint, company_id, company_type_id).
-- message is the service's text: of a JSON body ({"message": "Connection not found"}),
-- its message (or error); any other body as it came.
with

source as (
    select * from {{ raw_source('sync_issues') }}
),

final as (
    select
        sync_id,
        namespace_company_id,
        endpoint,
        company_id,
        company_type_id,
        http_status,
        case
            when json_valid(message) and json_type(cast(message as json)) = 'OBJECT'
                then coalesce(
                    json_extract_string(message, 'message'), json_extract_string(message, 'error'), message
                )
            else message
        end as message,
        synced_at
    from source
)

select * from final
