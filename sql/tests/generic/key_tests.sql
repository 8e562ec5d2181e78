{#- unique_key(columns): the combination of `columns` is unique; offending rows are the
    combinations that occur more than once (NULLs compare equal, as in GROUP BY). -#}
{% test unique_key(model, columns) %}
select {{ columns | join(", ") }}, count(*) as occurrences
from {{ model }}
group by {{ columns | join(", ") }}
having count(*) > 1
{% endtest %}

{#- not_null_key(columns): none of `columns` is NULL; offending rows have one that is. -#}
{% test not_null_key(model, columns) %}
select *
from {{ model }}
where {% for column in columns %}{{ column }} is null{{ " or " if not loop.last }}{% endfor %}
{% endtest %}

{#- one_row(): the model has exactly one row; the offending row says how many it has. -#}
{% test one_row(model) %}
select count(*) as row_count
from {{ model }}
having count(*) <> 1
{% endtest %}
