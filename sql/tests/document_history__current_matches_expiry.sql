-- The current versions of document_history are exactly the rows of document_expiry.
with

current_history as (
    select namespace_company_id, company_id, company_type_id, document_id
    from {{ ref('document_history') }}
    where is_current
),

expiry as (
    select namespace_company_id, company_id, company_type_id, document_id
    from {{ ref('document_expiry') }}
),

final as (
    (select * from current_history except all select * from expiry)
    union all
    (select * from expiry except all select * from current_history)
)

select * from final
