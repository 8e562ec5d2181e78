-- analytics.answers_wide_columns
-- Grain: one row per distinct field_id in analytics.answers.
-- Key: field_id; also unique: column_name, column_position.
-- Which answers_wide column holds which field. A field is one column across company
-- types; its label is taken from its first occurrence (by company type, form and field
-- position), which also sets the column order.
-- column_name: the label in lowercase ASCII snake case (accents folded), truncated to
-- 60 characters; `field_<id>` when the label yields nothing; a leading digit gets a
-- `field_` prefix; a name already taken (by a key column of answers_wide or an earlier
-- field) gets the first free suffix _2, _3, ...
with recursive

answers as (
    select * from {{ ref('answers') }}
),

fields as (
    select
        field_id,
        arg_min(field_label, (company_type_id, form_position, field_position)) as field_label,
        min((company_type_id, form_position, field_position)) as first_occurrence
    from answers
    where field_id is not null
    group by field_id
),

positioned as (
    select
        field_id,
        field_label,
        cast(row_number() over (order by first_occurrence, field_id) as integer)
            as column_position
    from fields
),

based as (
    select
        *,
        coalesce(
            nullif({{ snake_case('field_label') }}, ''),
            nullif({{ snake_case("'field_' || field_id") }}, ''),
            'field'
        ) as snake_name
    from positioned
),

with_base as (
    select
        *,
        rtrim(
            left(
                case when regexp_matches(snake_name, '^[0-9]') then 'field_' || snake_name
                    else snake_name end,
                60
            ),
            '_'
        ) as base_name
    from based
),

-- one step per field in column order, carrying the names taken so far
named (column_position, column_name, taken) as (
    select
        0,
        cast(null as varchar),
        ['namespace_company_id', 'company_id', 'company_name', 'is_own_company', 'company_type_id',
         'response_sha256']
    union all
    select
        step.column_position,
        step.column_name,
        list_append(step.taken, step.column_name)
    from (
        select
            with_base.column_position,
            named.taken,
            case
                when not list_contains(named.taken, with_base.base_name)
                    then with_base.base_name
                else list_filter(
                    list_transform(
                        range(2, len(named.taken) + 3),
                        lambda n: rtrim(left(with_base.base_name, 60 - length('_' || n)), '_')
                            || '_' || n
                    ),
                    lambda candidate: not list_contains(named.taken, candidate)
                )[1]
            end as column_name
        from named
        join with_base on with_base.column_position = named.column_position + 1
    ) as step
),

final as (
    select
        with_base.column_position,
        named.column_name,
        with_base.field_id,
        with_base.field_label
    from with_base
    join named on named.column_position = with_base.column_position
)

select * from final
order by column_position
