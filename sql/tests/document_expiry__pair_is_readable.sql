-- Every current document is readable now: it belongs to the namespace's own company, or
-- the connection currently gives the namespace reading rights on its company type
-- (analytics.reading_rights, direction 'received').
with

documents as (
    select * from {{ ref('document_expiry') }}
),

reading_rights as (
    select * from {{ ref('reading_rights') }}
),

final as (
    select documents.*
    from documents
    where documents.company_id is distinct from documents.namespace_company_id
        and not exists (
            select 1
            from reading_rights
            where reading_rights.direction = 'received'
                and reading_rights.namespace_company_id = documents.namespace_company_id
                and reading_rights.company_id = documents.company_id
                and reading_rights.company_type_id = documents.company_type_id
        )
)

select * from final
