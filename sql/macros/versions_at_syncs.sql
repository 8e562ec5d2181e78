{#-
    versions_at_syncs(versions, boundary): the rows of `versions` (a relation with
    namespace_company_id and the scd2 bounds valid_from / valid_to) whose `boundary`
    ('valid_from': the version started, 'valid_to': it ended) is a sync of the CTE
    `syncs` of the same namespace, with that sync's sync_id, detected_at (its snapshot
    time) and previous_synced_at.
-#}
{% macro versions_at_syncs(versions, boundary) -%}
    select
        syncs.sync_id,
        syncs.synced_at as detected_at,
        syncs.previous_synced_at,
        {{ versions }}.*
    from {{ versions }}
    join syncs
        on syncs.namespace_company_id = {{ versions }}.namespace_company_id
        and syncs.synced_at = {{ versions }}.{{ boundary }}
{%- endmacro %}
