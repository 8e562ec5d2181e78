-- Every answer is from the namespace's own company or one of its connections.
with

answers as (
    select * from {{ ref('answers') }}
),

connections as (
    select * from {{ ref('connections') }}
),

final as (
    select answers.*
    from answers
    where answers.company_id is distinct from answers.namespace_company_id
        and not exists (
            select 1
            from connections
            where connections.namespace_company_id = answers.namespace_company_id
                and connections.company_id = answers.company_id
        )
)

select * from final
