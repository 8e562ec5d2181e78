-- staging.stg_questionnaire_versions
-- Grain: one row per kept version of a questionnaire (dlt scd2 history).
-- Key: (namespace_company_id, company_id, company_type_id, version_number);
-- version_number counts 1, 2, ... in order of valid_from.
with

source as (
    select * from {{ raw_source('questionnaires') }}
),

final as (
    select
        namespace_company_id,
        company_id,
        company_type_id,
        row_number() over (
            partition by namespace_company_id, company_id, company_type_id
            order by _dlt_valid_from, content_hash
        ) as version_number,
        _dlt_valid_from as valid_from,
        _dlt_valid_to as valid_to,
        _dlt_valid_to is null as is_current,
        forms_json,
        content_hash,
        response_sha256,
        synced_at
    from source
)

select * from final
