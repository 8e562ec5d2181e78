-- staging.stg_service_key_versions
-- Grain: one row per kept version of a key path the service sent on an endpoint, per
-- namespace (dlt scd2 history: a version lasts while every sync keeps seeing the key).
-- Key: (namespace_company_id, endpoint, key_path, valid_from).
-- valid_from is the synced_at of the sync that first saw the key, valid_to that of the
-- first sync that no longer did (NULL while still sent).
with

source as (
    select * from {{ raw_source('service_keys') }}
),

final as (
    select
        namespace_company_id,
        endpoint,
        key_path,
        is_modelled,
        response_sha256,
        _dlt_valid_from as valid_from,
        _dlt_valid_to as valid_to,
        _dlt_valid_to is null as is_current
    from source
)

select * from final
