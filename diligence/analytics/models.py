"""Build the SQL models: the dbt project in `sql/` (see `sql/README.md`).

One ``dbt build`` (target ``build`` of :mod:`diligence.analytics.dbt`) builds the staging views
(schema `staging`) and every model of `analytics` beside its published relation, as
`analytics.<name>__build`, and runs the checks (the project's data tests, see
:mod:`diligence.analytics.checks`) on them; on this target a failing check warns, so it never
skips a model. Once every model has built, one DuckDB transaction renames the build's
tables over the published ones (a rename moves no data), makes each view of the build
again under its published name over the published tables (a view, such as
`freshness`, computes when it is read), drops what no model makes any more, and
describes them from the project's YAML. A reader of `analytics`, on the file or on a
lake, sees the previous build or the new one, never half of one. A failing model leaves
`analytics` as it was (the build's tables are dropped) and raises :class:`ModelError`
naming the model. The history marts are incremental: the swap keeps each one's replaced
table as the next build's `<name>__build`, which that build extends (:mod:`.incremental`).

Parameters reach the SQL as dbt vars of the invocation: ``as_of`` (UTC timestamp),
``versions_at_as_of`` (whether the models show the versions valid at ``as_of`` or every
one), ``expiring_within_days`` and ``time_zone`` (whose calendar days expiry counts).
"""

from __future__ import annotations

import contextlib
import re
import time
import zoneinfo
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from ..config import DEFAULT_EXPIRING_WITHIN_DAYS, DEFAULT_TIMEZONE
from ..errors import DbtError, DiligenceError, ModelError
from ..warehouse import Warehouse
from ..warehouse.location import WarehouseLocation
from ..warehouse.sql import sql_identifier, sql_string, transaction
from .checks import CheckResult, check_results
from .dbt import (
    ANALYTICS_SCHEMA,
    BUILD_SUFFIX,
    PROJECT_DIR,
    STAGING_SCHEMA,
    DbtRun,
    Description,
    artifacts_dir,
    describe_failure,
    descriptions,
    invoke,
    location_of,
    new_artifacts,
    prepare,
)
from .incremental import (
    HistoryTable,
    drop_stale_spares,
    fingerprints,
    form_bytes_to_read,
    history_rows,
    history_tables,
    rename_state,
)

SQL_DIR = PROJECT_DIR
RAW_SCHEMA = "raw"

__all__ = [
    "ANALYTICS_SCHEMA",
    "BUILD_SUFFIX",
    "STAGING_SCHEMA",
    "ModelError",
    "ModelsResult",
    "build_models",
    "copy_comments",
]


@dataclass(frozen=True)
class ModelsResult:
    as_of: datetime  # naive UTC
    expiring_within_days: int
    #: the time zone whose calendar days days_until_expiry counts
    time_zone: str = DEFAULT_TIMEZONE
    # model ("staging.stg_x", "analytics.answers") -> seconds, in the order dbt ran them
    timings: dict[str, float] = field(default_factory=dict)
    row_counts: dict[str, int] = field(default_factory=dict)  # analytics table -> rows
    seconds: float = 0.0
    #: the checks, run on the build before it was swapped in
    checks: list[CheckResult] = field(default_factory=list)
    #: the incremental models' tables (the analysts' copy takes their changed rows)
    history: dict[str, HistoryTable] = field(default_factory=dict)
    #: the incremental models built anew from all of `raw` (no table of theirs to extend,
    #: one made by other SQL, or --full-refresh); the others added the syncs since
    built_in_full: list[str] = field(default_factory=list)


def build_models(
    warehouse: Path | str | WarehouseLocation | Warehouse,
    *,
    expiring_within_days: int = DEFAULT_EXPIRING_WITHIN_DAYS,
    as_of: datetime | None = None,
    memory_limit: str | Callable[[int, int], str] | None = None,
    duckdb_threads: int | None = None,
    project_dir: Path = PROJECT_DIR,
    full_refresh: bool = False,
    time_zone: str = DEFAULT_TIMEZONE,
    versions_at_as_of: bool = False,
) -> ModelsResult:
    """Build the dbt project beside `analytics` and run its checks, then swap the build
    in (see the module docstring).

    `warehouse` is a DuckDB file, a parsed location (a lake) or the step's
    :class:`~diligence.warehouse.Warehouse` (its open session, if any, is not used: dbt
    opens the warehouse itself). `as_of` is "now" for document expiry; a naive datetime
    is read as UTC, and the default is the current time. Raises :class:`ModelError`
    naming the failing model; `analytics` then stays as it was. `project_dir` is the
    dbt project (a copy with more models, in tests). The history marts are extended by
    the syncs since their last build (:mod:`.incremental`); `full_refresh` builds them
    anew from all of `raw` (the same tables). `memory_limit` is DuckDB's, or chosen
    before the build from the bytes of questionnaire forms it will parse (a function of
    them and of the history marts' rows, such as
    :func:`~diligence.warehouse.models_memory_limit`). With `versions_at_as_of` every
    model shows the warehouse as it stood at `as_of`, the versions valid then (the
    register as of a date, :mod:`.register`; dbt var ``versions_at_as_of``); otherwise
    `as_of` moves only the clock, over every version.
    """
    if isinstance(expiring_within_days, bool) or not isinstance(expiring_within_days, int):
        raise TypeError("expiring_within_days must be an int")
    if expiring_within_days < 0:
        raise ValueError("expiring_within_days must be >= 0")
    location = location_of(warehouse)
    as_of_utc = _to_naive_utc(as_of or datetime.now(UTC))
    started = time.perf_counter()
    variables: dict[str, Any] = {
        "as_of": as_of_utc.isoformat(sep=" "),
        "expiring_within_days": expiring_within_days,
        "time_zone": _known_time_zone(time_zone),
        "versions_at_as_of": versions_at_as_of,
    }
    manifest = prepare("build", project_dir)
    variables["fingerprints"] = fingerprints(manifest, variables)
    with _session(warehouse, location) as con:
        in_full = drop_stale_spares(con, variables["fingerprints"])
        if callable(memory_limit):
            memory_limit = memory_limit(form_bytes_to_read(con, bool(in_full) or full_refresh),
                                        history_rows(con, history_tables(manifest)))
    with new_artifacts(location) as target_path:
        run = invoke(
            ["build", "--exclude-resource-type", "unit_test",  # make test runs them
             *(["--full-refresh"] if full_refresh else [])],
            location,
            target="build",
            variables=variables,
            memory_limit=memory_limit,
            duckdb_threads=duckdb_threads,
            project_dir=project_dir,
            target_path=target_path,
        )
    if not run.success:
        error = _model_error(run, artifacts_dir(location))
        # where the build wrote, for a full disk whose message names no file
        error.path = location.path or artifacts_dir(location)
        with contextlib.suppress(duckdb.Error), _session(warehouse, location) as con:
            # a lake's readers would see them until the next build; the incremental
            # models' stay, each as its own transaction left it, for the next build
            _drop_build_tables(con, keep=variables["fingerprints"])
        raise error
    models = [node for node in run.nodes if node.resource_type == "model"]
    timings = {f"{node.schema}.{node.name}": node.seconds for node in models}
    checks = check_results(run, "dbt build")
    published = [node for node in models if node.schema == ANALYTICS_SCHEMA]
    try:
        with _session(warehouse, location) as con:
            row_counts = swap_into_analytics(
                con, [node.name for node in published if node.materialized != "view"],
                descriptions("build", project_dir),
                views={node.name: node.compiled_code or "" for node in published
                       if node.materialized == "view"},
                incremental=[node.name for node in published if node.materialized == "incremental"])
    except duckdb.Error as exc:
        raise ModelError("swap into analytics", str(exc).splitlines()[0]) from exc
    return ModelsResult(
        as_of=as_of_utc,
        expiring_within_days=expiring_within_days,
        time_zone=variables["time_zone"],
        timings=timings,
        row_counts=row_counts,
        seconds=time.perf_counter() - started,
        checks=checks,
        history=history_tables(manifest),
        built_in_full=sorted(variables["fingerprints"]) if full_refresh else sorted(in_full),
    )


def swap_into_analytics(
    con: duckdb.DuckDBPyConnection,
    built: Collection[str],
    described: dict[str, Description] | None = None,
    *,
    views: Mapping[str, str] | None = None,
    incremental: Collection[str] = (),
) -> dict[str, int]:
    """In one transaction: rename each table `analytics.<name>__build` of the models
    `built` over `analytics.<name>` (its comments go with it), where the published table
    of an `incremental` model becomes its `<name>__build`, the next build's spare (see
    :mod:`.incremental`); make each view of `views` (name -> its compiled SELECT, which
    reads the build's tables) again as `analytics.<name>` over the published tables; drop
    every other table and view of `analytics` (a model that no longer exists, a build's
    leftover); and describe the tables, views and columns from `described` (the
    project's YAML). Returns the row count of each analytics relation, by qualified name."""
    present = _analytics_relations(con)
    renamed = sorted(name for name in built if name + BUILD_SUFFIX in present["table"])
    spared = [name for name in renamed if name in incremental]
    made = sorted(views or {})
    kept = {name + BUILD_SUFFIX for name in renamed} | set(spared)
    row_counts: dict[str, int] = {}
    with transaction(con):
        for view in present["view"]:  # a view is made again from its SQL below
            con.execute(f"drop view {ANALYTICS_SCHEMA}.{sql_identifier(view)}")
        for table in present["table"]:
            if table not in kept:
                con.execute(f"drop table {ANALYTICS_SCHEMA}.{sql_identifier(table)}")
        for name in renamed:
            published, build = sql_identifier(name), sql_identifier(name + BUILD_SUFFIX)
            if name in spared and name in present["table"]:
                swapping = sql_identifier(name + _SWAPPING_SUFFIX)
                con.execute(f"alter table {ANALYTICS_SCHEMA}.{published} rename to {swapping}")
                con.execute(f"alter table {ANALYTICS_SCHEMA}.{build} rename to {published}")
                con.execute(f"alter table {ANALYTICS_SCHEMA}.{swapping} rename to {build}")
            else:
                con.execute(f"alter table {ANALYTICS_SCHEMA}.{build} rename to {published}")
        rename_state(con, spared)
        for name in made:
            con.execute(f"create view {ANALYTICS_SCHEMA}.{sql_identifier(name)} as "
                        f"{_published_sql((views or {})[name])}")
        _describe(con, [*renamed, *made], described or {})
        for relation in [*renamed, *made]:
            count = con.execute(f"select count(*) from {ANALYTICS_SCHEMA}.{sql_identifier(relation)}").fetchone()
            row_counts[f"{ANALYTICS_SCHEMA}.{relation}"] = int(count[0])  # type: ignore[index]
    return row_counts


#: An incremental model's published table while the swap trades it for the build's.
_SWAPPING_SUFFIX = "__swapping"


#: A relation of the build in compiled SQL: ``"analytics"."<name>__build"`` (dbt quotes
#: every identifier and leaves the catalog out, see sql/macros/relations.sql).
_BUILD_RELATION = re.compile(rf'("{ANALYTICS_SCHEMA}"\.")([^"]+){BUILD_SUFFIX}"')


def _published_sql(compiled: str) -> str:
    """A view's compiled SELECT reading the published relations instead of the build's."""
    return _BUILD_RELATION.sub(r'\1\2"', compiled)


def _analytics_relations(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """The tables and the views of `analytics`, by kind ("table", "view")."""
    relations: dict[str, list[str]] = {"table": [], "view": []}
    for name, kind in con.execute(
        "select table_name, table_type from information_schema.tables where table_catalog = "
        "current_database() and table_schema = ? order by table_name", [ANALYTICS_SCHEMA]
    ).fetchall():
        relations["view" if kind == "VIEW" else "table"].append(name)
    return relations


def _drop_build_tables(con: duckdb.DuckDBPyConnection, keep: Collection[str] = ()) -> None:
    """Drop what a failed build left beside the published relations, but the tables of
    the incremental models `keep` (each is what its own transaction left: the next build
    extends it, see :mod:`.incremental`)."""
    present = _analytics_relations(con)
    for kind in ("view", "table"):
        for name in present[kind]:
            if name.endswith(BUILD_SUFFIX) and not (kind == "table" and name.removesuffix(BUILD_SUFFIX) in keep):
                con.execute(f"drop {kind} {ANALYTICS_SCHEMA}.{sql_identifier(name)}")


def copy_comments(
    con: duckdb.DuckDBPyConnection,
    source_catalog: str,
    target_catalog: str,
    *,
    source_schema: str = ANALYTICS_SCHEMA,
) -> int:
    """Copy the COMMENTs of the tables and columns of `source_schema` of one attached
    database to the same tables of `analytics` in another (or the same) one (CREATE
    TABLE AS does not carry them), e.g. into the analysts' published copy. Returns the
    number of comments written."""
    source = {"catalog": source_catalog, "schema": source_schema}
    tables = con.execute(
        "select table_name, comment from duckdb_tables() where database_name = $catalog "
        "and schema_name = $schema and comment is not null union all select view_name, comment "
        "from duckdb_views() where database_name = $catalog and schema_name = $schema "
        "and comment is not null", source
    ).fetchall()
    columns = con.execute(
        "select table_name, column_name, comment from duckdb_columns() "
        "where database_name = $catalog and schema_name = $schema and comment is not null", source
    ).fetchall()
    present = dict(con.execute(
        "select table_name, 'table' from duckdb_tables() where database_name = $catalog "
        "and schema_name = $schema union all select view_name, 'view' from duckdb_views() "
        "where database_name = $catalog and schema_name = $schema",
        {"catalog": target_catalog, "schema": ANALYTICS_SCHEMA},
    ).fetchall())
    target = sql_identifier(target_catalog)
    written = 0
    for table, comment in tables:
        if table in present:
            relation = f"{target}.{ANALYTICS_SCHEMA}.{sql_identifier(table)}"
            con.execute(f"comment on {present[table]} {relation} is {sql_string(comment)}")
            written += 1
    for table, column, comment in columns:
        if table in present:
            relation = f"{target}.{ANALYTICS_SCHEMA}.{sql_identifier(table)}"
            con.execute(
                f"comment on column {relation}.{sql_identifier(column)} is {sql_string(comment)}"
            )
            written += 1
    return written


def _describe(con: duckdb.DuckDBPyConnection, tables: list[str], described: dict[str, Description]) -> None:
    """COMMENT ON each table of `analytics` and each of its columns that `described` has."""
    present: dict[str, set[str]] = {}
    for table, column in con.execute(
        "select table_name, column_name from duckdb_columns() "
        "where database_name = current_database() and schema_name = ?", [ANALYTICS_SCHEMA]
    ).fetchall():
        present.setdefault(table, set()).add(column)
    views = set(_analytics_relations(con)["view"])
    # a DuckLake takes no COMMENT on a view's columns (its table comment it does take)
    on_lake = con.execute(
        "select type from duckdb_databases() where database_name = current_database()"
    ).fetchone()[0] == "ducklake"  # type: ignore[index]
    for table in tables:
        description = described.get(table)
        if description is None:
            continue
        relation = f"{ANALYTICS_SCHEMA}.{sql_identifier(table)}"
        if description.table:
            kind = "view" if table in views else "table"
            con.execute(f"comment on {kind} {relation} is {sql_string(description.table)}")
        for column, text in description.columns.items():
            if column in present.get(table, ()) and not (on_lake and table in views):
                con.execute(
                    f"comment on column {relation}.{sql_identifier(column)} is {sql_string(text)}"
                )


def _model_error(run: DbtRun, artifacts: Path) -> DiligenceError:
    """ModelError naming the failed model, the SQL file dbt ran for it (in the build's
    `artifacts`) and the database's ``LINE n:`` with its caret; DbtError when dbt could
    not run at all, or a check could not run."""
    failed = run.first_failure()
    if failed is None:
        return DbtError(describe_failure(run, "dbt build"))
    message = failed.message or failed.status
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    detail = next((line for line in lines if not line.startswith("Runtime Error")), lines[0] if lines else "")
    if failed.resource_type == "test":
        return DbtError(f"check {failed.name} could not run: {detail}", node=failed.name)
    return ModelError(f"{failed.schema}.{failed.name}", detail,
                      sql_path=artifacts / failed.sql_path if failed.sql_path else None,
                      caret=_caret(message))


def _caret(message: str) -> str | None:
    """The database's ``LINE n: <sql>`` line and the caret under it, if it gave them."""
    lines = message.splitlines()
    for index, line in enumerate(lines[:-1]):
        if re.match(r"\s*LINE \d+:", line) and lines[index + 1].strip() == "^":
            indent = len(line) - len(line.lstrip())
            return f"{line[indent:]}\n{lines[index + 1][indent:]}"
    return None


@contextlib.contextmanager
def _session(warehouse: Any, location: WarehouseLocation) -> Iterator[duckdb.DuckDBPyConnection]:
    """The step's session of a Warehouse (reused if open), else a connection of its own."""
    session = getattr(warehouse, "session", None)
    if callable(session):
        with session() as con:
            yield con
        return
    with Warehouse(location).session(memory_limit=None) as con:
        yield con


def _known_time_zone(name: str) -> str:
    """`name` if it is an IANA time zone (``UTC``, ``Europe/Zurich``), else ValueError."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise ValueError(f"time_zone {name!r} is not a known time zone (an IANA name such as UTC)") from None
    return name


def _to_naive_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)
