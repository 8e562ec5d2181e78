"""Build the SQL models: the dbt project in `sql/` (see `sql/README.md`).

One ``dbt build`` (target ``build`` of :mod:`diligence.analytics.dbt`) builds the staging views
(schema `staging`) and every table model beside its published table, as
`analytics.<name>__build`, and runs the checks (the project's data tests, see
:mod:`diligence.analytics.checks`) on them; on this target a failing check warns, so it never
skips a model. Once every model has built, one DuckDB transaction renames the build's
tables over the published ones (a rename moves no data), drops the tables of models
that no longer exist, and describes them from the project's YAML. A reader of
`analytics`, on the file or on a lake, sees the previous build or the new one, never
half of one. A failing model leaves `analytics` as it was (the build's tables are
dropped) and raises :class:`ModelError` naming the model.

Parameters reach the SQL as dbt vars of the invocation: ``as_of`` (UTC timestamp) and
``expiring_within_days``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from ..errors import DiligenceError
from ..warehouse import Warehouse
from ..warehouse.location import WarehouseLocation
from ..warehouse.sql import sql_identifier, sql_string
from .checks import CheckResult, check_results
from .dbt import (
    ANALYTICS_SCHEMA,
    BUILD_SUFFIX,
    PROJECT_DIR,
    STAGING_SCHEMA,
    DbtError,
    DbtRun,
    Description,
    describe_failure,
    descriptions,
    invoke,
    location_of,
)

SQL_DIR = PROJECT_DIR
RAW_SCHEMA = "raw"
#: `analytics` as an SQL literal: the catalog queries of the swap and the copy bind no
#: parameter (binding one makes DuckDB import pandas, 0.6 s that nothing else here needs)
_ANALYTICS = sql_string(ANALYTICS_SCHEMA)

__all__ = [
    "ANALYTICS_SCHEMA",
    "BUILD_SUFFIX",
    "STAGING_SCHEMA",
    "ModelError",
    "ModelsResult",
    "build_models",
    "copy_comments",
]


class ModelError(DiligenceError):
    """A model failed to build; `analytics` stays as the previous build left it."""

    def __init__(self, model_name: str, duckdb_message: str) -> None:
        super().__init__(f"model {model_name} failed: {duckdb_message}")
        self.model_name = model_name
        self.duckdb_message = duckdb_message

    @property
    def out_of_memory(self) -> bool:
        return "Out of Memory" in self.duckdb_message


@dataclass(frozen=True)
class ModelsResult:
    as_of: datetime  # naive UTC
    expiring_within_days: int
    # model ("staging.stg_x", "analytics.answers") -> seconds, in the order dbt ran them
    timings: dict[str, float] = field(default_factory=dict)
    row_counts: dict[str, int] = field(default_factory=dict)  # analytics table -> rows
    seconds: float = 0.0
    #: the checks, run on the build before it was swapped in
    checks: list[CheckResult] = field(default_factory=list)


def build_models(
    warehouse: Path | str | WarehouseLocation | Warehouse,
    *,
    expiring_within_days: int = 30,
    as_of: datetime | None = None,
    memory_limit: str | None = None,
    duckdb_threads: int | None = None,
    project_dir: Path = PROJECT_DIR,
) -> ModelsResult:
    """Build the dbt project beside `analytics` and run its checks, then swap the build
    in (see the module docstring).

    `warehouse` is a DuckDB file, a parsed location (a lake) or the step's
    :class:`~diligence.warehouse.Warehouse` (its open session, if any, is not used: dbt
    opens the warehouse itself). `as_of` is "now" for document expiry; a naive datetime
    is read as UTC, and the default is the current time. Raises :class:`ModelError`
    naming the failing model; `analytics` then stays as it was. `project_dir` is the
    dbt project (a copy with more models, in tests).
    """
    if isinstance(expiring_within_days, bool) or not isinstance(expiring_within_days, int):
        raise TypeError("expiring_within_days must be an int")
    if expiring_within_days < 0:
        raise ValueError("expiring_within_days must be >= 0")
    location = location_of(warehouse)
    as_of_utc = _to_naive_utc(as_of or datetime.now(UTC))
    started = time.perf_counter()
    run = invoke(
        ["build"],
        location,
        target="build",
        variables={
            "as_of": as_of_utc.isoformat(sep=" "),
            "expiring_within_days": expiring_within_days,
        },
        memory_limit=memory_limit,
        duckdb_threads=duckdb_threads,
        project_dir=project_dir,
    )
    if not run.success:
        error = _model_error(run)
        with contextlib.suppress(duckdb.Error), _session(warehouse, location) as con:
            _drop_build_tables(con)  # a lake's readers would see them until the next build
        raise error
    models = [node for node in run.nodes if node.resource_type == "model"]
    timings = {f"{node.schema}.{node.name}": node.seconds for node in models}
    checks = check_results(run, "dbt build")
    try:
        with _session(warehouse, location) as con:
            row_counts = swap_into_analytics(
                con, [node.name for node in models if node.schema == ANALYTICS_SCHEMA],
                descriptions("build", project_dir))
    except duckdb.Error as exc:
        raise ModelError("swap into analytics", str(exc).splitlines()[0]) from exc
    return ModelsResult(
        as_of=as_of_utc,
        expiring_within_days=expiring_within_days,
        timings=timings,
        row_counts=row_counts,
        seconds=time.perf_counter() - started,
        checks=checks,
    )


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """The block's statements in one transaction of `con`: committed at its end, rolled
    back if it raises (a DuckDB connection's own context manager closes it instead)."""
    con.execute("begin transaction")
    try:
        yield
        con.execute("commit")
    except BaseException:
        with contextlib.suppress(duckdb.Error):  # no transaction left to roll back
            con.execute("rollback")
        raise


def swap_into_analytics(
    con: duckdb.DuckDBPyConnection,
    built: Collection[str],
    described: dict[str, Description] | None = None,
) -> dict[str, int]:
    """In one transaction: rename each table `analytics.<name>__build` of the models
    `built` over `analytics.<name>` (its comments go with it), drop every other table of
    `analytics` (a model that no longer exists, a build's leftover), and describe the
    tables and columns from `described` (the project's YAML). Returns the row count of
    each analytics table, by qualified name."""
    present = _analytics_tables(con)
    renamed = sorted(name for name in built if name + BUILD_SUFFIX in present)
    row_counts: dict[str, int] = {}
    with transaction(con):
        for table in present:
            if not (table.endswith(BUILD_SUFFIX) and table.removesuffix(BUILD_SUFFIX) in renamed):
                con.execute(f"drop table {ANALYTICS_SCHEMA}.{sql_identifier(table)}")
        for name in renamed:
            con.execute(f"alter table {ANALYTICS_SCHEMA}.{sql_identifier(name + BUILD_SUFFIX)} "
                        f"rename to {sql_identifier(name)}")
        _describe(con, renamed, described or {})
        for table in renamed:
            count = con.execute(f"select count(*) from {ANALYTICS_SCHEMA}.{sql_identifier(table)}").fetchone()
            row_counts[f"{ANALYTICS_SCHEMA}.{table}"] = int(count[0])  # type: ignore[index]
    return row_counts


def _analytics_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [row[0] for row in con.execute(
        "select table_name from duckdb_tables() where database_name = current_database() "
        f"and schema_name = {_ANALYTICS} order by table_name").fetchall()]


def _drop_build_tables(con: duckdb.DuckDBPyConnection) -> None:
    """Drop what a failed build left beside the published tables."""
    for table in _analytics_tables(con):
        if table.endswith(BUILD_SUFFIX):
            con.execute(f"drop table {ANALYTICS_SCHEMA}.{sql_identifier(table)}")


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
    # catalog queries bind no parameter: binding one makes DuckDB import pandas (0.6 s)
    source = f"database_name = {sql_string(source_catalog)} and schema_name = {sql_string(source_schema)}"
    tables = con.execute(
        f"select table_name, comment from duckdb_tables() where {source} and comment is not null"
    ).fetchall()
    columns = con.execute(
        "select table_name, column_name, comment from duckdb_columns() "
        f"where {source} and comment is not null"
    ).fetchall()
    present = {
        row[0]
        for row in con.execute(
            "select table_name from duckdb_tables() "
            f"where database_name = {sql_string(target_catalog)} and schema_name = {_ANALYTICS}"
        ).fetchall()
    }
    target = sql_identifier(target_catalog)
    written = 0
    for table, comment in tables:
        if table in present:
            relation = f"{target}.{ANALYTICS_SCHEMA}.{sql_identifier(table)}"
            con.execute(f"comment on table {relation} is {sql_string(comment)}")
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
        f"where database_name = current_database() and schema_name = {_ANALYTICS}"
    ).fetchall():
        present.setdefault(table, set()).add(column)
    for table in tables:
        description = described.get(table)
        if description is None:
            continue
        relation = f"{ANALYTICS_SCHEMA}.{sql_identifier(table)}"
        if description.table:
            con.execute(f"comment on table {relation} is {sql_string(description.table)}")
        for column, text in description.columns.items():
            if column in present.get(table, ()):
                con.execute(
                    f"comment on column {relation}.{sql_identifier(column)} is {sql_string(text)}"
                )


def _model_error(run: DbtRun) -> DiligenceError:
    """ModelError naming the failed model; DbtError when dbt could not run at all, or a
    check could not run."""
    failed = run.first_failure()
    if failed is None:
        return DbtError(describe_failure(run, "dbt build"))
    message = failed.message or failed.status
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    detail = next((line for line in lines if not line.startswith("Runtime Error")), lines[0] if lines else "")
    if failed.resource_type == "test":
        return DbtError(f"check {failed.name} could not run: {detail}", node=failed.name)
    return ModelError(f"{failed.schema}.{failed.name}", detail)


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


def _to_naive_utc(value: datetime) -> datetime:
    if value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)
