-- analytics.answer_changes
-- Grain: one row per change of a field's answer_text over the kept versions of a
-- questionnaire, including the questionnaire leaving the current state and coming back.
-- Key: (namespace_company_id, company_id, company_type_id, field_id, changed_at).
-- Transitions of a questionnaire (dlt scd2 versions, in order of valid_from):
--   * a version that replaces the previous one at once: compared field by field; a field
--     absent from a version counts as unanswered there, so a field that appears answered,
--     disappears while answered, becomes answered or becomes unanswered is a change with
--     NULL on one side; one that appears or disappears unanswered is not. change_type:
--     'answered', 'cleared', 'changed', 'field_added', 'field_removed'.
--   * a version that ends with no successor at that time (the questionnaire left the
--     current tables): every answered field becomes NULL; change_type is the reason from
--     stg_access_ends: 'access_withdrawn', 'not_found', 'disconnected' or 'removed'.
--   * a version that starts after such a gap: every answered field becomes answered
--     again; change_type 'restored'.
-- changed_at is the synced_at of the sync that saw the transition (the new version's
-- valid_from, or the ended version's valid_to). The first version is no change.
-- Incremental (macros/incremental.sql): a build adds the changes of the syncs since the
-- table's last build, from the answer_history rows of the versions that started or
-- ended then, and renames the rows of a company whose name changed since.
{%- set watermarks = incremental_watermarks() %}
with

versions as (
    select * from {{ ref('stg_questionnaire_versions') }}
),

access_ends as (
    select * from {{ ref('stg_access_ends') }}
),

company_names as (
    select * from {{ ref('stg_company_names') }}
),

answer_history as (
    {{ rows_after_watermark(ref('answer_history'), watermarks, ['versioned_at', 'superseded_at']) }}
),
{%- if watermarks is not none %}

built as (
    select * from {{ this }}
),
{%- endif %}

ordered as (
    select
        namespace_company_id,
        company_id,
        company_type_id,
        version_number,
        valid_from,
        valid_to,
        lag(version_number) over questionnaire as previous_version_number,
        lag(valid_to) over questionnaire as previous_valid_to,
        lead(valid_from) over questionnaire as next_valid_from
    from versions
    window questionnaire as (
        partition by namespace_company_id, company_id, company_type_id
        order by version_number
    )
),

transitions as (
    select
        namespace_company_id,
        company_id,
        company_type_id,
        previous_version_number as old_version_number,
        version_number as new_version_number,
        valid_from as changed_at,
        'replaced' as transition
    from ordered
    where previous_version_number is not null and previous_valid_to = valid_from
    union all
    select
        namespace_company_id,
        company_id,
        company_type_id,
        null as old_version_number,
        version_number as new_version_number,
        valid_from as changed_at,
        'restored' as transition
    from ordered
    where previous_version_number is not null
        and previous_valid_to is not null
        and previous_valid_to < valid_from
    union all
    select
        namespace_company_id,
        company_id,
        company_type_id,
        version_number as old_version_number,
        null as new_version_number,
        valid_to as changed_at,
        'ended' as transition
    from ordered
    where valid_to is not null and next_valid_from is distinct from valid_to
),

new_transitions as (
    select * from transitions
    where {{ is_after_watermark(watermarks, ['changed_at']) }}
),

old_fields as (
    select
        new_transitions.*,
        answer_history.form_id,
        answer_history.form_label,
        answer_history.field_id,
        answer_history.field_label,
        answer_history.answer_text
    from new_transitions
    join answer_history
        on answer_history.namespace_company_id = new_transitions.namespace_company_id
        and answer_history.company_id = new_transitions.company_id
        and answer_history.company_type_id = new_transitions.company_type_id
        and answer_history.version_number = new_transitions.old_version_number
),

new_fields as (
    select
        new_transitions.*,
        answer_history.form_id,
        answer_history.form_label,
        answer_history.field_id,
        answer_history.field_label,
        answer_history.answer_text
    from new_transitions
    join answer_history
        on answer_history.namespace_company_id = new_transitions.namespace_company_id
        and answer_history.company_id = new_transitions.company_id
        and answer_history.company_type_id = new_transitions.company_type_id
        and answer_history.version_number = new_transitions.new_version_number
),

compared as (
    select
        coalesce(new_fields.namespace_company_id, old_fields.namespace_company_id)
            as namespace_company_id,
        coalesce(new_fields.company_id, old_fields.company_id) as company_id,
        coalesce(new_fields.company_type_id, old_fields.company_type_id) as company_type_id,
        coalesce(new_fields.form_id, old_fields.form_id) as form_id,
        coalesce(new_fields.form_label, old_fields.form_label) as form_label,
        coalesce(new_fields.field_id, old_fields.field_id) as field_id,
        coalesce(new_fields.field_label, old_fields.field_label) as field_label,
        old_fields.answer_text as old_answer_text,
        new_fields.answer_text as new_answer_text,
        coalesce(new_fields.transition, old_fields.transition) as transition,
        old_fields.field_id is not null as is_in_old_version,
        new_fields.field_id is not null as is_in_new_version,
        coalesce(new_fields.old_version_number, old_fields.old_version_number)
            as old_version_number,
        coalesce(new_fields.new_version_number, old_fields.new_version_number)
            as new_version_number,
        coalesce(new_fields.changed_at, old_fields.changed_at) as changed_at
    from old_fields
    full outer join new_fields
        on new_fields.namespace_company_id = old_fields.namespace_company_id
        and new_fields.company_id = old_fields.company_id
        and new_fields.company_type_id = old_fields.company_type_id
        and new_fields.changed_at = old_fields.changed_at
        and new_fields.field_id = old_fields.field_id
),

changes as (
    select
        compared.* exclude (is_in_old_version, is_in_new_version),
        case compared.transition
            when 'restored' then 'restored'
            when 'ended' then coalesce(access_ends.end_reason, 'removed')
            else
                case
                    when not compared.is_in_old_version then 'field_added'
                    when not compared.is_in_new_version then 'field_removed'
                    when compared.old_answer_text is null then 'answered'
                    when compared.new_answer_text is null then 'cleared'
                    else 'changed'
                end
        end as change_type
    from compared
    -- on the key alone (an equality join); the reason is read for 'ended' only
    left join access_ends
        on access_ends.namespace_company_id = compared.namespace_company_id
        and access_ends.company_id = compared.company_id
        and access_ends.company_type_id = compared.company_type_id
        and access_ends.ended_at = compared.changed_at
    where compared.old_answer_text is distinct from compared.new_answer_text
),

named as (
    select
        changes.namespace_company_id,
        changes.company_id,
        company_names.company_name,
        changes.company_id = changes.namespace_company_id as is_own_company,
        changes.company_type_id,
        changes.form_id,
        changes.form_label,
        changes.field_id,
        changes.field_label,
        changes.old_answer_text,
        changes.new_answer_text,
        changes.change_type,
        changes.old_version_number,
        changes.new_version_number,
        changes.changed_at
    from changes
    left join company_names
        on company_names.namespace_company_id = changes.namespace_company_id
        and company_names.company_id = changes.company_id
),

-- final: what this build made, and the rows built before of a company renamed since
{{ renamed_and_final(watermarks) }}

select * from final
