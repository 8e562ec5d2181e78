-- staging.stg_questionnaire_versions
-- Grain: one row per kept version of a questionnaire (dlt scd2 history).
-- Key: (namespace_company_id, company_id, company_type_id, version_number);
-- version_number counts 1, 2, ... in order of valid_from.
-- The versions are numbered on their keys alone and joined to their forms: a filter on
-- valid_from / valid_to reaches the scan of the raw forms (answer_history reads only
-- the versions its build adds), and no window sorts the forms. `source` is read twice
-- and never materialised as a whole (forms included).
with

source as not materialized (
    select * from {{ raw_source('questionnaires') }}
),

numbered as (
    select
        namespace_company_id,
        company_id,
        company_type_id,
        _dlt_valid_from,
        content_hash,
        row_number() over (
            partition by namespace_company_id, company_id, company_type_id
            order by _dlt_valid_from, content_hash
        ) as version_number
    from source
),

final as (
    select
        source.namespace_company_id,
        source.company_id,
        source.company_type_id,
        numbered.version_number,
        source._dlt_valid_from as valid_from,
        source._dlt_valid_to as valid_to,
        source._dlt_valid_to is null as is_current,
        source.forms_json,
        source.content_hash,
        source.response_sha256,
        source.synced_at
    from source
    join numbered
        on numbered.namespace_company_id = source.namespace_company_id
        and numbered.company_id = source.company_id
        and numbered.company_type_id = source.company_type_id
        and numbered._dlt_valid_from is not distinct from source._dlt_valid_from
        and numbered.content_hash is not distinct from source.content_hash
)

select * from final
