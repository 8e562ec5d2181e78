-- analytics.changes
-- Grain: one row per change a sync saw, against the namespace's previous successful sync.
-- Key: change_id (a hash of the columns that identify the change).
-- detected_at is the sync's snapshot time (the boundary of the versions it started and
-- ended), so a change is found from the versions that start or end at a sync:
--   connection_added / connection_removed  a connection listed now and not before, or
--       the reverse (old_value / new_value: its reading rights as JSON); its company's
--       details, answers and documents come and go with it, without a row each
--   reading_rights_changed  the rights given or received changed (JSON before / after);
--       the questionnaires and documents that became readable or unreadable with them
--       have no row each either
--   company_changed  a modelled value of the company's details changed (name, country,
--       city, lei, cin): JSON of the changed values before / after
--   answer_added / answer_changed / answer_removed  a field of a questionnaire that was
--       replaced became answered, changed its answer or became unanswered (answer_text
--       before / after, as in analytics.answer_changes); fields a template change adds or
--       removes are template rows, not a row per questionnaire
--   document_added / document_removed  a document listed now and not before (new_value:
--       its name), or no longer listed while its company type stays readable (old_value)
--   document_changed  a modelled value changed (name, category, type, issueDate,
--       expirationDate): JSON before / after
--   document_newly_expiring / document_newly_expired  the document's expiry status at
--       this sync (as of its snapshot time, window var expiring_within_days) is expiring
--       (expired), and at the previous sync it was neither expiring nor expired (not
--       expired) or the document was not there (old_value / new_value: the status)
--   template_field_added / template_field_removed  a company type's questionnaire template
--       gained or lost a field (its label); template_field_changed: its label, type or
--       options changed (JSON before / after)
--   service_key_added / service_key_removed  the namespace's sync started or stopped seeing
--       a key path on an endpoint (field_id: the key path; new_value / old_value: the
--       endpoint); compared only between two syncs that both recorded keys
-- A namespace's first sync has no previous one: it records no changes. A sync in which
-- nothing changed has no rows.
-- In words, for people: item_label names what changed within the company (the field's
-- label, the document's name, the key path; NULL when it is the company itself), and
-- old_text / new_text are old_value / new_value in words (sql/macros/change_words.sql:
-- dates as dates, options by label, rights and changed values as 'key: value' lists;
-- newly expiring / expired: the status and its day). is_own_company: the change is of the
-- namespace's own company (false for counterparties, templates and service keys).
-- Incremental (macros/incremental.sql): a build adds the changes of the syncs since the
-- table's last build, and renames the rows of a company whose name changed since.
{%- set watermarks = incremental_watermarks() %}
with

sync_runs as (
    select * from {{ ref('stg_sync_runs') }}
    where status = 'success'
),

connection_versions as (
    select
        *,
        -- the reading rights given and received, as the change's old / new value
        cast(to_json({
            'given': list_sort(given_company_type_ids),
            'received': list_sort(received_company_type_ids)
        }) as varchar) as rights
    from {{ ref('stg_connection_versions') }}
    where is_history_kept
),

company_versions as (
    select * from {{ ref('stg_company_versions') }}
),

questionnaire_versions as (
    select * from {{ ref('stg_questionnaire_versions') }}
),

document_versions as (
    select * from {{ ref('document_history') }}
),

template_fields as (
    select * from {{ ref('stg_questionnaire_template_versions') }}
),

key_versions as (
    select * from {{ ref('stg_service_key_versions') }}
),

sync_issues as (
    select * from {{ ref('stg_sync_issues') }}
),

company_names as (
    select * from {{ ref('stg_company_names') }}
),

answer_changes as (
    {{ rows_after_watermark(ref('answer_changes'), watermarks, ['changed_at']) }}
),
{%- if watermarks is not none %}

built as (
    select * from {{ this }}
),
{%- endif %}

every_sync as (
    -- every successful sync of a namespace after its first, with the one before it
    select
        namespace_company_id,
        sync_id,
        synced_at,
        lag(synced_at) over (
            partition by namespace_company_id order by synced_at
        ) as previous_synced_at
    from sync_runs
    qualify previous_synced_at is not null
),

syncs as (
    -- those since the table's last build
    select * from every_sync
    where {{ is_after_watermark(watermarks, ['synced_at']) }}
),

-- connections --------------------------------------------------------------------------
{{ starts_and_ends('connection', 'connection_versions') }},

connection_transitions as (
    select
        {{ either_side(['sync_id', 'detected_at', 'namespace_company_id', 'company_id']) }},
        ends.rights as old_rights,
        starts.rights as new_rights,
        starts.response_sha256
    from connection_ends as ends
    full outer join connection_starts as starts
        on {{ same(['namespace_company_id', 'company_id', 'detected_at'], 'starts', 'ends') }}
),

connection_changes as (
    select
        sync_id,
        detected_at,
        namespace_company_id,
        company_id,
        case
            when old_rights is null then 'connection_added'
            when new_rights is null then 'connection_removed'
            else 'reading_rights_changed'
        end as change_kind,
        old_rights as old_value,
        new_rights as new_value,
        response_sha256
    from connection_transitions
    where old_rights is distinct from new_rights
),

-- the (sync, namespace, company) whose readable items came or went with the connection
scope_changes as (
    select distinct sync_id, namespace_company_id, company_id
    from connection_changes
),

-- companies -----------------------------------------------------------------------------
company_pairs as (
    select
        syncs.sync_id,
        syncs.synced_at as detected_at,
        new.namespace_company_id,
        new.company_id,
        {{ attributes({'name': 'company_name', 'country': 'country', 'city': 'city', 'lei': 'lei',
                       'cin': 'cin'}, 'old', 'new') }} as attributes,
        new.response_sha256
    {{ replaced_at_syncs('company_versions', ['namespace_company_id', 'company_id']) }}
),

company_changes as (
    select
        sync_id,
        detected_at,
        namespace_company_id,
        company_id,
        'company_changed' as change_kind,
        {{ changed_values('attributes', 'old') }} as old_value,
        {{ changed_values('attributes', 'new') }} as new_value,
        response_sha256
    from company_pairs
    where {{ changed_values('attributes', 'new') }} is not null
),

-- answers -------------------------------------------------------------------------------
answer_rows as (
    select
        syncs.sync_id,
        syncs.synced_at as detected_at,
        answer_changes.namespace_company_id,
        answer_changes.company_id,
        answer_changes.company_type_id,
        answer_changes.field_id,
        case answer_changes.change_type
            when 'answered' then 'answer_added'
            when 'cleared' then 'answer_removed'
            else 'answer_changed'
        end as change_kind,
        answer_changes.field_label as item_label,
        answer_changes.old_answer_text as old_value,
        answer_changes.new_answer_text as new_value,
        questionnaire_versions.response_sha256
    from answer_changes
    join syncs
        on syncs.namespace_company_id = answer_changes.namespace_company_id
        and syncs.synced_at = answer_changes.changed_at
    left join questionnaire_versions
        on questionnaire_versions.namespace_company_id = answer_changes.namespace_company_id
        and questionnaire_versions.company_id = answer_changes.company_id
        and questionnaire_versions.company_type_id = answer_changes.company_type_id
        and questionnaire_versions.version_number = answer_changes.new_version_number
    where answer_changes.change_type in ('answered', 'changed', 'cleared')
),

-- documents -----------------------------------------------------------------------------
{{ starts_and_ends('document', 'document_versions') }},

document_transitions as (
    select
        {{ either_side(['sync_id', 'detected_at', 'namespace_company_id', 'company_id',
                        'company_type_id', 'document_id']) }},
        ends.document_id is not null as was_listed,
        ends.end_reason,
        starts.document_id is not null as is_listed,
        ends.document_name as old_name,
        starts.document_name as new_name,
        {{ attributes({'name': 'document_name', 'category': 'category', 'type': 'type',
                       'issueDate': 'issue_date_text', 'expirationDate': 'expiration_date_text'},
                      'ends', 'starts') }} as attributes,
        starts.response_sha256
    from document_ends as ends
    full outer join document_starts as starts
        on {{ same(['namespace_company_id', 'company_id', 'company_type_id', 'document_id',
                    'detected_at'], 'starts', 'ends') }}
),

-- a (company, company type) the previous sync could not read (403/404): what it lists
-- now came back with the access
denied_before as (
    select distinct syncs.sync_id, sync_issues.namespace_company_id, sync_issues.company_id,
        sync_issues.company_type_id
    from sync_issues
    join syncs
        on syncs.namespace_company_id = sync_issues.namespace_company_id
        and syncs.previous_synced_at = sync_issues.synced_at
    where sync_issues.http_status in (403, 404) and sync_issues.company_type_id is not null
),

document_changes as (
    select
        transitions.sync_id,
        transitions.detected_at,
        transitions.namespace_company_id,
        transitions.company_id,
        transitions.company_type_id,
        transitions.document_id,
        coalesce(transitions.new_name, transitions.old_name) as item_label,
        {{ presence_change('document', 'transitions.was_listed', 'transitions.is_listed',
                           'transitions.old_name', 'transitions.new_name',
                           'transitions.attributes') }},
        transitions.response_sha256
    from document_transitions as transitions
    where
        case
            when not transitions.was_listed then
                not exists (
                    select 1 from scope_changes
                    where scope_changes.sync_id = transitions.sync_id
                        and scope_changes.namespace_company_id = transitions.namespace_company_id
                        and scope_changes.company_id = transitions.company_id
                )
                and not exists (
                    select 1 from denied_before
                    where denied_before.sync_id = transitions.sync_id
                        and denied_before.namespace_company_id = transitions.namespace_company_id
                        and denied_before.company_id = transitions.company_id
                        and denied_before.company_type_id = transitions.company_type_id
                )
            when not transitions.is_listed then transitions.end_reason = 'removed'
            else {{ changed_values('transitions.attributes', 'new') }} is not null
        end
),

-- document expiry -------------------------------------------------------------------------
expiry_candidates as (
    -- versions current at a sync whose expiry may have entered the window or passed
    -- since the previous sync (their date after the previous sync, or a new version)
    select
        syncs.sync_id,
        syncs.synced_at as detected_at,
        syncs.previous_synced_at,
        {{ expiring_within_days() }} as expiring_within_days,
        document_versions.*
    from document_versions
    join syncs
        on syncs.namespace_company_id = document_versions.namespace_company_id
    where document_versions.valid_from <= syncs.synced_at
        and (document_versions.valid_to is null or document_versions.valid_to > syncs.synced_at)
        and {{ expiry_day('document_versions.expiration_date') }}
            <= {{ calendar_day('syncs.synced_at') }} + {{ expiring_within_days() }}
        and (
            {{ expiry_day('document_versions.expiration_date') }}
                >= {{ calendar_day('syncs.previous_synced_at') }}
            or document_versions.valid_from = syncs.synced_at
        )
),

expiry_statuses as (
    -- the version current at the previous sync: the candidate itself when it started
    -- before it, else the version it replaced (none: the document was not there)
    select
        candidates.sync_id,
        candidates.detected_at,
        candidates.namespace_company_id,
        candidates.company_id,
        candidates.company_type_id,
        candidates.document_id,
        candidates.document_name,
        candidates.expiration_date,
        candidates.response_sha256,
        {{ expiry_status('candidates.expiration_date', 'candidates.is_expiration_date_invalid',
                         'candidates.detected_at', 'candidates.expiring_within_days') }} as status_now,
        case
            when candidates.valid_from <= candidates.previous_synced_at then
                {{ expiry_status('candidates.expiration_date', 'candidates.is_expiration_date_invalid',
                                 'candidates.previous_synced_at', 'candidates.expiring_within_days') }}
            when replaced.document_id is not null then
                {{ expiry_status('replaced.expiration_date', 'replaced.is_expiration_date_invalid',
                                 'candidates.previous_synced_at', 'candidates.expiring_within_days') }}
        end as status_then
    from expiry_candidates as candidates
    left join document_versions as replaced
        on replaced.namespace_company_id = candidates.namespace_company_id
        and replaced.company_id = candidates.company_id
        and replaced.company_type_id = candidates.company_type_id
        and replaced.document_id = candidates.document_id
        and replaced.valid_to = candidates.valid_from
),

expiry_changes as (
    select
        sync_id,
        detected_at,
        namespace_company_id,
        company_id,
        company_type_id,
        document_id,
        case status_now
            when 'expired' then 'document_newly_expired'
            else 'document_newly_expiring'
        end as change_kind,
        document_name as item_label,
        status_then as old_value,
        status_now as new_value,
        -- the status and the day it is about
        status_now || (case status_now when 'expired' then ' since ' else ' on ' end)
            || strftime({{ expiry_day('expiration_date') }}, '%Y-%m-%d') as new_text,
        response_sha256
    from expiry_statuses
    where (
            (status_now = 'expired' and coalesce(status_then, '') <> 'expired')
            or (status_now = 'expiring' and coalesce(status_then, '') not in ('expiring', 'expired'))
        )
        and not exists (
            select 1 from scope_changes
            where scope_changes.sync_id = expiry_statuses.sync_id
                and scope_changes.namespace_company_id = expiry_statuses.namespace_company_id
                and scope_changes.company_id = expiry_statuses.company_id
        )
),

-- templates -----------------------------------------------------------------------------
template_versions as (
    select distinct namespace_company_id, company_type_id, valid_from, valid_to
    from template_fields
),

template_pairs as (
    -- a template replaced at a sync by a new version of it
    select
        syncs.sync_id,
        syncs.synced_at as detected_at,
        new.namespace_company_id,
        new.company_type_id,
        old.valid_from as old_valid_from,
        new.valid_from as new_valid_from
    {{ replaced_at_syncs('template_versions', ['namespace_company_id', 'company_type_id']) }}
),

template_pair_fields as (
    -- the fields of both versions of a pair; is_new: of the new version
    select
        template_pairs.*,
        template_fields.valid_from = template_pairs.new_valid_from as is_new,
        template_fields.* exclude (namespace_company_id, company_type_id)
    from template_pairs
    join template_fields
        on {{ same(['namespace_company_id', 'company_type_id'], 'template_fields', 'template_pairs') }}
        and template_fields.valid_from in (template_pairs.old_valid_from, template_pairs.new_valid_from)
    where template_fields.field_id is not null
),

template_compared as (
    select
        {{ either_side(['sync_id', 'detected_at', 'namespace_company_id', 'company_type_id',
                        'field_id'], new='new', old='old') }},
        old.field_id is not null as was_there,
        new.field_id is not null as is_there,
        old.field_label as old_label,
        new.field_label as new_label,
        [
            {'name': 'label', 'old': old.field_label, 'new': new.field_label},
            {'name': 'type', 'old': old.field_type, 'new': new.field_type},
            {'name': 'options', 'old': cast(to_json(old.field_options) as varchar),
             'new': cast(to_json(new.field_options) as varchar)}
        ] as attributes,
        new.response_sha256
    from (select * from template_pair_fields where not is_new) as old
    full outer join (select * from template_pair_fields where is_new) as new
        on {{ same(['namespace_company_id', 'company_type_id', 'detected_at', 'field_id'],
                   'new', 'old') }}
),

template_changes as (
    select
        sync_id,
        detected_at,
        namespace_company_id,
        company_type_id,
        field_id,
        coalesce(new_label, old_label) as item_label,
        {{ presence_change('template_field', 'was_there', 'is_there', 'old_label', 'new_label',
                           'attributes') }},
        response_sha256
    from template_compared
    where not was_there or not is_there or {{ changed_values('attributes', 'new') }} is not null
),

-- service keys --------------------------------------------------------------------------
keys_recorded as (
    -- syncs whose previous sync recorded the namespace's keys (older releases did not)
    select distinct syncs.sync_id, syncs.namespace_company_id
    from syncs
    join key_versions
        on key_versions.namespace_company_id = syncs.namespace_company_id
        and key_versions.valid_from <= syncs.previous_synced_at
        and (key_versions.valid_to is null or key_versions.valid_to > syncs.previous_synced_at)
),

{{ starts_and_ends('key', 'key_versions') }},

key_changes as (
    select
        {{ either_side(['sync_id', 'detected_at', 'namespace_company_id']) }},
        coalesce(starts.key_path, ends.key_path) as field_id,
        coalesce(starts.key_path, ends.key_path) as item_label,
        case when ends.key_path is null then 'service_key_added' else 'service_key_removed' end
            as change_kind,
        ends.endpoint as old_value,
        starts.endpoint as new_value,
        starts.response_sha256
    from key_ends as ends
    full outer join key_starts as starts
        on {{ same(['namespace_company_id', 'endpoint', 'key_path', 'detected_at'], 'starts', 'ends') }}
    join keys_recorded
        on keys_recorded.sync_id = coalesce(starts.sync_id, ends.sync_id)
        and keys_recorded.namespace_company_id
            = coalesce(starts.namespace_company_id, ends.namespace_company_id)
    where ends.key_path is null or starts.key_path is null
),

-- all (by name: a kind's CTE leaves out the columns it has no value for) ------------------
unioned as (
    select * from connection_changes
    union all by name
    select * from company_changes
    union all by name
    select * from answer_rows
    union all by name
    select * from document_changes
    union all by name
    select * from expiry_changes
    union all by name
    select * from template_changes
    union all by name
    select * from key_changes
),

named as (
    select
        md5(concat_ws(
            chr(31), unioned.sync_id, unioned.namespace_company_id, unioned.change_kind,
            coalesce(unioned.company_id, ''), coalesce(unioned.company_type_id, ''),
            coalesce(unioned.document_id, ''), coalesce(unioned.field_id, ''),
            case when unioned.change_kind like 'service_key_%'
                then coalesce(unioned.new_value, unioned.old_value) else '' end
        )) as change_id,
        unioned.sync_id,
        unioned.detected_at,
        unioned.namespace_company_id,
        unioned.company_id,
        company_names.company_name,
        coalesce(unioned.company_id = unioned.namespace_company_id, false) as is_own_company,
        unioned.company_type_id,
        unioned.field_id,
        unioned.document_id,
        unioned.change_kind,
        unioned.item_label,
        unioned.old_value,
        unioned.new_value,
        {{ change_words('unioned.change_kind', 'unioned.old_value') }} as old_text,
        coalesce(unioned.new_text, {{ change_words('unioned.change_kind', 'unioned.new_value') }})
            as new_text,
        unioned.response_sha256
    from unioned
    left join company_names
        on company_names.namespace_company_id = unioned.namespace_company_id
        and company_names.company_id = unioned.company_id
),

-- final: what this build made, and the rows built before of a company renamed since
{{ renamed_and_final(watermarks) }}

select * from final
