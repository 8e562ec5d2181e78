"""Build the SQL models: schema `staging` (views over `raw`) and schema `analytics`.

The build order and the raw tables staging reads are declared in `sql/manifest.toml`.
Everything runs in one DuckDB transaction: both schemas are dropped and recreated
inside it, so a reader sees either the previous build or the new one, never half of
one. A failing model rolls the whole build back and raises `ModelError`.

Every analytics table and column gets a `COMMENT ON` from the documentation next to its
code: a mart's header comment (the text before `Columns:` describes the table, lines
`-- - <column>: <description>` its columns), else the shared `[columns]` descriptions
of the manifest; marts built in Python are described in `[python_marts_descriptions]`.

Parameters reach the SQL as DuckDB variables, set with bound values:
`getvariable('as_of')` (TIMESTAMP, UTC) and `getvariable('expiring_within_days')`
(INTEGER). The only text substituted into SQL is `{{ source('<table>') }}`, replaced
by a subquery built from the manifest's trusted identifiers and types.
"""

from __future__ import annotations

import re
import time
import tomllib
import unicodedata
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

import duckdb

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"
MANIFEST_PATH = SQL_DIR / "manifest.toml"
RAW_SCHEMA = "raw"
STAGING_SCHEMA = "staging"
ANALYTICS_SCHEMA = "analytics"

# Key columns of analytics.answers_wide; field columns never take these names.
WIDE_KEY_COLUMNS = ("namespace_company_id", "company_id", "company_name", "company_type_id")
WIDE_NAME_MAX_LENGTH = 60

_SOURCE_PATTERN = re.compile(r"\{\{\s*source\(\s*'([a-z_][a-z0-9_]*)'\s*\)\s*\}\}")
_IDENTIFIER = re.compile(r"[a-z_][a-z0-9_]*")
_TYPES = {"varchar", "json", "boolean", "bigint", "integer", "double", "timestamptz", "timestamp"}


class ModelError(Exception):
    """A model failed to build; the whole build was rolled back."""

    def __init__(self, model_name: str, duckdb_message: str) -> None:
        super().__init__(f"model {model_name} failed: {duckdb_message}")
        self.model_name = model_name
        self.duckdb_message = duckdb_message


@dataclass(frozen=True)
class Model:
    name: str  # qualified relation name, e.g. "analytics.answers"
    layer: str  # "staging" or "marts"
    path: Path | None  # None for marts built in Python


@dataclass(frozen=True)
class ModelsResult:
    as_of: datetime  # naive UTC
    expiring_within_days: int
    timings: dict[str, float] = field(default_factory=dict)  # model -> seconds, build order
    row_counts: dict[str, int] = field(default_factory=dict)  # analytics table -> rows
    seconds: float = 0.0


@dataclass(frozen=True)
class Manifest:
    models: list[Model]
    sources: dict[str, dict[str, str]]  # raw table -> column -> DuckDB type
    # column -> description shared by every mart that has the column
    columns: dict[str, str] = field(default_factory=dict)
    # python mart name -> {"table": ..., "columns": {column: description}}
    python_descriptions: dict[str, dict] = field(default_factory=dict)


@dataclass(frozen=True)
class Description:
    """What a mart's documentation says about the table and its columns."""

    table: str
    columns: dict[str, str]


_COLUMN_LINE = re.compile(r"^- ([a-z_][a-z0-9_]*):\s*(.*)$")


@cache
def load_manifest(path: Path = MANIFEST_PATH) -> Manifest:
    """Read the build order and the raw source declarations."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    python_marts = set(data["models"].get("python_marts", []))
    models: list[Model] = []
    for layer, schema in (("staging", STAGING_SCHEMA), ("marts", ANALYTICS_SCHEMA)):
        for name in data["models"][layer]:
            _require_identifier(name)
            sql_path = None if name in python_marts else path.parent / layer / f"{name}.sql"
            if sql_path is not None and not sql_path.is_file():
                raise FileNotFoundError(f"model {schema}.{name}: missing {sql_path}")
            models.append(Model(name=f"{schema}.{name}", layer=layer, path=sql_path))
    sources: dict[str, dict[str, str]] = {}
    for table, columns in data.get("sources", {}).items():
        _require_identifier(table)
        for column, column_type in columns.items():
            _require_identifier(column)
            if column_type not in _TYPES:
                raise ValueError(f"source {table}.{column}: unsupported type {column_type!r}")
        sources[table] = dict(columns)
    return Manifest(
        models=models,
        sources=sources,
        columns=dict(data.get("columns", {})),
        python_descriptions=dict(data.get("python_marts_descriptions", {})),
    )


def parse_header(sql: str) -> Description:
    """The table and column descriptions in a model's leading comment block.

    The first line names the model and is skipped; the lines up to `Columns:` describe
    the table; below it, `- <column>: <text>` starts a column's description and more
    indented lines continue it.
    """
    lines: list[str] = []
    for line in sql.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].removeprefix(" "))
    table_lines: list[str] = []
    columns: dict[str, str] = {}
    current: str | None = None
    in_columns = False
    for line in lines[1:]:
        if not in_columns:
            if line.strip() == "Columns:":
                in_columns = True
            elif line.strip():
                table_lines.append(line.strip())
            continue
        match = _COLUMN_LINE.match(line)
        if match:
            current = match.group(1)
            columns[current] = match.group(2).strip()
        elif current is not None and line.strip():
            columns[current] = f"{columns[current]} {line.strip()}"
    return Description(table=" ".join(table_lines), columns=columns)


def mart_description(model: Model, manifest: Manifest) -> Description:
    """The documentation of a mart: its header, or the manifest for Python marts."""
    if model.path is not None:
        return parse_header(model.path.read_text(encoding="utf-8"))
    name = model.name.split(".", 1)[1]
    described = manifest.python_descriptions.get(name, {})
    return Description(
        table=str(described.get("table", "")),
        columns={k: str(v) for k, v in described.get("columns", {}).items()},
    )


def build_models(
    warehouse: Path | duckdb.DuckDBPyConnection,
    *,
    expiring_within_days: int = 30,
    as_of: datetime | None = None,
) -> ModelsResult:
    """(Re)build schemas `staging` and `analytics` in one transaction.

    `as_of` is "now" for document expiry; a naive datetime is read as UTC, and the
    default is the current time. Raises `ModelError` naming the failing model; the
    previous build then stays in place. `warehouse` is a DuckDB file, or an open
    connection (e.g. to a lake, see `diligence.lake.connect`) that the caller closes.
    """
    if isinstance(expiring_within_days, bool) or not isinstance(expiring_within_days, int):
        raise TypeError("expiring_within_days must be an int")
    if expiring_within_days < 0:
        raise ValueError("expiring_within_days must be >= 0")
    as_of_utc = _to_naive_utc(as_of or datetime.now(UTC))
    manifest = load_manifest()
    started = time.perf_counter()
    timings: dict[str, float] = {}
    owned = not isinstance(warehouse, duckdb.DuckDBPyConnection)
    con = duckdb.connect(str(warehouse)) if owned else warehouse
    try:
        con.execute("set variable as_of = cast(? as timestamp)", [as_of_utc])
        con.execute(
            "set variable expiring_within_days = cast(? as integer)", [expiring_within_days]
        )
        raw_columns = _raw_columns(con)
        con.execute("begin transaction")
        current = "schemas"
        try:
            for schema in (ANALYTICS_SCHEMA, STAGING_SCHEMA):
                con.execute(f"drop schema if exists {schema} cascade")
            for schema in (STAGING_SCHEMA, ANALYTICS_SCHEMA):
                con.execute(f"create schema {schema}")
            for model in manifest.models:
                current = model.name
                t0 = time.perf_counter()
                _build_model(con, model, manifest.sources, raw_columns)
                timings[model.name] = time.perf_counter() - t0
            current = "comments"
            _comment_marts(con, manifest)
            current = "row counts"
            row_counts = {
                model.name: con.execute(f"select count(*) from {model.name}").fetchone()[0]
                for model in manifest.models
                if model.layer == "marts"
            }
            current = "commit"
            con.execute("commit")
        except duckdb.Error as exc:
            _rollback(con)
            raise ModelError(current, str(exc)) from exc
        except BaseException:
            _rollback(con)
            raise
    finally:
        if owned:
            con.close()
    return ModelsResult(
        as_of=as_of_utc,
        expiring_within_days=expiring_within_days,
        timings=timings,
        row_counts=row_counts,
        seconds=time.perf_counter() - started,
    )


def render_sql(
    sql: str, sources: dict[str, dict[str, str]], raw_columns: dict[str, set[str]]
) -> str:
    """Replace each `{{ source('<table>') }}` with a typed subquery over raw.<table>."""

    def replace(match: re.Match[str]) -> str:
        table = match.group(1)
        if table not in sources:
            raise ValueError(f"source {table!r} is not declared in {MANIFEST_PATH.name}")
        return _source_relation(table, sources[table], raw_columns.get(table))

    return _SOURCE_PATTERN.sub(replace, sql)


def wide_column_names(labels: list[str | None], field_ids: list[str]) -> list[str]:
    """Unique, safe column names for answers_wide, in the order given.

    Lowercase ASCII snake case of the label (accents folded), truncated to 60
    characters; `field_<id>` when the label yields nothing; a leading digit gets a
    `field_` prefix; a name already taken (by a key column or an earlier field) gets
    the first free suffix `_2`, `_3`, ...
    """
    taken = set(WIDE_KEY_COLUMNS)
    names: list[str] = []
    for label, field_id in zip(labels, field_ids, strict=True):
        base = _snake(label or "") or _snake(f"field_{field_id}") or "field"
        if base[0].isdigit():
            base = f"field_{base}"
        base = base[:WIDE_NAME_MAX_LENGTH].rstrip("_")
        name, n = base, 1
        while name in taken:
            n += 1
            suffix = f"_{n}"
            name = base[: WIDE_NAME_MAX_LENGTH - len(suffix)].rstrip("_") + suffix
        taken.add(name)
        names.append(name)
    return names


def _build_model(
    con: duckdb.DuckDBPyConnection,
    model: Model,
    sources: dict[str, dict[str, str]],
    raw_columns: dict[str, set[str]],
) -> None:
    if model.path is None:
        _PYTHON_MARTS[model.name](con)
        return
    sql = render_sql(model.path.read_text(encoding="utf-8"), sources, raw_columns)
    kind = "view" if model.layer == "staging" else "table"
    con.execute(f"create {kind} {model.name} as\n{sql}")


def _build_answers_wide_columns(con: duckdb.DuckDBPyConnection) -> None:
    """analytics.answers_wide_columns: which answers_wide column holds which field.

    Grain: one row per distinct field_id in analytics.answers. Key: field_id; also
    unique: column_name, column_position. A field is one column across company types;
    its label is taken from its first occurrence (by company type, form and field
    position), which also sets the column order.
    """
    fields = con.execute(
        """
        select
            field_id,
            arg_min(field_label, (company_type_id, form_position, field_position)) as label
        from analytics.answers
        where field_id is not null
        group by field_id
        order by min((company_type_id, form_position, field_position)), field_id
        """
    ).fetchall()
    names = wide_column_names([label for _, label in fields], [fid for fid, _ in fields])
    con.execute(
        """
        create table analytics.answers_wide_columns (
            column_position integer,
            column_name varchar,
            field_id varchar,
            field_label varchar
        )
        """
    )
    if fields:
        con.executemany(
            "insert into analytics.answers_wide_columns values (?, ?, ?, ?)",
            [
                (position, name, field_id, label)
                for position, ((field_id, label), name) in enumerate(zip(fields, names, strict=True), start=1)
            ],
        )


def _build_answers_wide(con: duckdb.DuckDBPyConnection) -> None:
    """analytics.answers_wide: one row per current questionnaire.

    Key: (namespace_company_id, company_id, company_type_id). One column per field
    (see answers_wide_columns), holding answer_text. Column names come from
    wide_column_names, so they only contain [a-z0-9_] and are safe to quote.
    """
    columns = con.execute(
        "select column_position, column_name from analytics.answers_wide_columns "
        "order by column_position"
    ).fetchall()
    for _, name in columns:
        if not _IDENTIFIER.fullmatch(name):
            raise ValueError(f"unsafe answers_wide column name {name!r}")
    keys = "namespace_company_id, company_id, company_type_id"
    if columns:
        positions = ", ".join(str(int(position)) for position, _ in columns)
        selected = ",\n        ".join(
            f'pivoted."{int(position)}" as "{name}"' for position, name in columns
        )
        pivot_ctes = f"""
pivoted_answers as (
    select answers.namespace_company_id, answers.company_id, answers.company_type_id,
        wide_columns.column_position, answers.answer_text
    from answers
    join wide_columns on wide_columns.field_id = answers.field_id
),

pivoted as (
    pivot pivoted_answers
    on column_position in ({positions})
    using first(answer_text)
    group by {keys}
),
"""
        join = (
            "left join pivoted"
            "\n        on pivoted.namespace_company_id = questionnaires.namespace_company_id"
            "\n        and pivoted.company_id = questionnaires.company_id"
            "\n        and pivoted.company_type_id = questionnaires.company_type_id"
        )
        field_columns = f",\n        {selected}"
    else:
        pivot_ctes, join, field_columns = "", "", ""
    sql = f"""
create table analytics.answers_wide as
with

questionnaires as (
    select * from staging.stg_questionnaires
),

companies as (
    select * from staging.stg_companies
),

answers as (
    select * from analytics.answers
),

wide_columns as (
    select * from analytics.answers_wide_columns
),
{pivot_ctes}
final as (
    select
        questionnaires.namespace_company_id,
        questionnaires.company_id,
        companies.company_name,
        questionnaires.company_type_id{field_columns}
    from questionnaires
    left join companies
        on companies.namespace_company_id = questionnaires.namespace_company_id
        and companies.company_id = questionnaires.company_id
    {join}
)

select * from final
"""
    con.execute(sql)


def _comment_marts(con: duckdb.DuckDBPyConnection, manifest: Manifest) -> None:
    """COMMENT ON every analytics table and each of its columns that is described.

    A column is described by the mart's own documentation, else by the manifest's shared
    `[columns]`; answers_wide's field columns by the field they hold.
    """
    wide_fields = {
        name: (field_id, label)
        for name, field_id, label in con.execute(
            "select column_name, field_id, field_label from analytics.answers_wide_columns"
        ).fetchall()
    }
    for model in manifest.models:
        if model.layer != "marts":
            continue
        description = mart_description(model, manifest)
        if description.table:
            con.execute(f"comment on table {model.name} is {_sql_literal(description.table)}")
        schema, table = model.name.split(".", 1)
        columns = con.execute(
            "select column_name from information_schema.columns "
            "where table_schema = ? and table_name = ? and table_catalog = current_database() "
            "order by ordinal_position",
            [schema, table],
        ).fetchall()
        for (column,) in columns:
            text = description.columns.get(column) or manifest.columns.get(column)
            if text is None and table == "answers_wide" and column in wide_fields:
                field_id, label = wide_fields[column]
                text = f"answer_text of field {field_id} ({label or 'no label'})"
            if text:
                con.execute(
                    f'comment on column {model.name}."{column}" is {_sql_literal(text)}'
                )


def copy_comments(
    con: duckdb.DuckDBPyConnection, source_catalog: str, target_catalog: str
) -> int:
    """Copy the COMMENTs of the `analytics` tables and columns of one attached database
    to the same tables of another (CREATE TABLE AS does not carry them), e.g. into the
    analysts' published copy. Returns the number of comments written."""
    _require_identifier(target_catalog)  # the source is only a bound parameter
    tables = con.execute(
        "select table_name, comment from duckdb_tables() "
        "where database_name = ? and schema_name = ? and comment is not null",
        [source_catalog, ANALYTICS_SCHEMA],
    ).fetchall()
    columns = con.execute(
        "select table_name, column_name, comment from duckdb_columns() "
        "where database_name = ? and schema_name = ? and comment is not null",
        [source_catalog, ANALYTICS_SCHEMA],
    ).fetchall()
    present = {
        row[0]
        for row in con.execute(
            "select table_name from duckdb_tables() where database_name = ? and schema_name = ?",
            [target_catalog, ANALYTICS_SCHEMA],
        ).fetchall()
    }
    written = 0
    for table, comment in tables:
        if table in present:
            con.execute(
                f'comment on table {target_catalog}.{ANALYTICS_SCHEMA}."{table}" '
                f"is {_sql_literal(comment)}"
            )
            written += 1
    for table, column, comment in columns:
        if table in present:
            con.execute(
                f'comment on column {target_catalog}.{ANALYTICS_SCHEMA}."{table}"."{column}" '
                f"is {_sql_literal(comment)}"
            )
            written += 1
    return written


def _sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


_PYTHON_MARTS = {
    f"{ANALYTICS_SCHEMA}.answers_wide_columns": _build_answers_wide_columns,
    f"{ANALYTICS_SCHEMA}.answers_wide": _build_answers_wide,
}


def _source_relation(table: str, declared: dict[str, str], present: set[str] | None) -> str:
    """A parenthesised subquery with exactly the declared columns and types."""
    if present is None:
        columns = ", ".join(
            f"cast(null as {column_type}) as {column}" for column, column_type in declared.items()
        )
        return f"(select {columns} where false)"
    columns = ", ".join(
        f'cast("{column}" as {column_type}) as {column}'
        if column in present
        else f"cast(null as {column_type}) as {column}"
        for column, column_type in declared.items()
    )
    return f'(select {columns} from {RAW_SCHEMA}."{table}")'


def _rollback(con: duckdb.DuckDBPyConnection) -> None:
    try:
        con.execute("rollback")
    except duckdb.Error:
        pass  # no transaction left to roll back (e.g. a failed commit ended it)


def _raw_columns(con: duckdb.DuckDBPyConnection) -> dict[str, set[str]]:
    rows = con.execute(
        """
        select table_name, column_name
        from information_schema.columns
        where table_schema = ? and table_catalog = current_database()
        """,
        [RAW_SCHEMA],
    ).fetchall()
    tables: dict[str, set[str]] = {}
    for table, column in rows:
        tables.setdefault(table, set()).add(column)
    return tables


def _to_naive_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


def _snake(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    return re.sub(r"[^a-z0-9]+", "_", ascii_text.lower()).strip("_")


def _require_identifier(name: str) -> None:
    if not _IDENTIFIER.fullmatch(name):
        raise ValueError(f"{name!r} is not a plain lowercase identifier")
