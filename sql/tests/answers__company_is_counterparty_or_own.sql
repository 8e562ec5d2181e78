-- Every answer's company is a counterparty (analytics.counterparties) or the namespace's
-- own company.
with

answers as (
    select * from {{ ref('answers') }}
),

counterparties as (
    select * from {{ ref('counterparties') }}
),

final as (
    select answers.*
    from answers
    where answers.company_id is distinct from answers.namespace_company_id
        and answers.company_id not in (
            select company_id from counterparties where company_id is not null
        )
)

select * from final
