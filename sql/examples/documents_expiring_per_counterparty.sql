-- Which documents have expired or expire soon, per counterparty?
-- One row per document of a counterparty that has expired, expires within the window
-- (expiring_within_days of the build, 30 by default) or has an unreadable expiration
-- date. A document seen through several namespaces is one row (namespaces lists them);
-- counterparties are told apart by company_id, not by name.
select
    counterparties.company_name,
    document_expiry.company_id,
    document_expiry.company_type_id,
    document_expiry.document_id,
    any_value(document_expiry.document_name) as document_name,
    any_value(document_expiry.expiry_status) as expiry_status,
    any_value(document_expiry.expiration_date) as expiration_date,
    any_value(document_expiry.expiration_date_text) as expiration_date_text,
    any_value(document_expiry.days_until_expiry) as days_until_expiry,
    list_sort(list(document_expiry.namespace_company_id)) as namespaces,
    max(document_expiry.synced_at) as confirmed_at
from analytics.document_expiry
join analytics.counterparties
    on counterparties.company_id = document_expiry.company_id
where not document_expiry.is_own_company
    and document_expiry.expiry_status in ('expired', 'expiring', 'invalid_date')
group by all
order by
    counterparties.company_name,
    document_expiry.company_id,
    days_until_expiry nulls first,
    document_expiry.document_id;
