-- analytics.answers_wide
-- Grain: one row per current questionnaire.
-- Key: (namespace_company_id, company_id, company_type_id).
-- response_sha256: the questionnaire version's response (see answers for each answer's).
-- One column per field (named in answers_wide_columns, in its column_position order),
-- holding answer_text; the column list is read from answers_wide_columns when the model
-- is built, and the field columns are described by the field they hold.
{{ config(post_hook="{{ comment_wide_columns(this, ref('answers_wide_columns')) }}") }}

{%- set wide_columns = wide_column_list(ref('answers_wide_columns')) %}
with

questionnaires as (
    select * from {{ ref('stg_questionnaires') }}
),

companies as (
    select * from {{ ref('stg_companies') }}
),

answers as (
    select * from {{ ref('answers') }}
),

wide_columns as (
    select * from {{ ref('answers_wide_columns') }}
),
{% if wide_columns %}
positioned_answers as (
    select
        answers.namespace_company_id,
        answers.company_id,
        answers.company_type_id,
        wide_columns.column_position,
        answers.answer_text
    from answers
    join wide_columns on wide_columns.field_id = answers.field_id
),

pivoted as (
    pivot positioned_answers
    on column_position in ({% for position, name in wide_columns %}{{ position }}{{ ", " if not loop.last }}{% endfor %})
    using first(answer_text)
    group by namespace_company_id, company_id, company_type_id
),
{% endif %}
final as (
    select
        questionnaires.namespace_company_id,
        questionnaires.company_id,
        companies.company_name,
        questionnaires.company_id = questionnaires.namespace_company_id as is_own_company,
        questionnaires.company_type_id,
        questionnaires.response_sha256
        {%- for position, name in wide_columns %},
        pivoted."{{ position }}" as {{ adapter.quote(name) }}
        {%- endfor %}
    from questionnaires
    left join companies
        on companies.namespace_company_id = questionnaires.namespace_company_id
        and companies.company_id = questionnaires.company_id
    {%- if wide_columns %}
    left join pivoted
        on pivoted.namespace_company_id = questionnaires.namespace_company_id
        and pivoted.company_id = questionnaires.company_id
        and pivoted.company_type_id = questionnaires.company_type_id
    {%- endif %}
)

select * from final
