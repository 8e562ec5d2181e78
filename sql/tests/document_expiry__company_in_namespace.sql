-- Every document is from the namespace's own company or one of its connections.
with

documents as (
    select * from {{ ref('document_expiry') }}
),

connections as (
    select * from {{ ref('connections') }}
),

final as (
    select documents.*
    from documents
    where documents.company_id is distinct from documents.namespace_company_id
        and not exists (
            select 1
            from connections
            where connections.namespace_company_id = documents.namespace_company_id
                and connections.company_id = documents.company_id
        )
)

select * from final
