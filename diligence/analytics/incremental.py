"""The history marts built incrementally: which build extends which table, and with what.

dbt builds every table of `analytics` beside its published one, as
`analytics.<name>__build` (``sql/macros/generate_alias_name.sql``), and
:func:`diligence.analytics.models.swap_into_analytics` renames the build's tables over
the published ones once the whole build has succeeded. The history marts
(``answer_history``, ``answer_changes``, ``document_history``, ``connection_history``,
``changes``) are dbt incremental models (``sql/macros/incremental.sql``): dbt extends the
table it finds under the model's name, ``<name>__build``, by the syncs since that table's
build. So the swap keeps the table it replaces, as the next build's::

    before the swap      analytics.x = build n-1        analytics.x__build = build n
    after (one txn)      analytics.x = build n          analytics.x__build = build n-1

and the next build extends ``x__build`` by the syncs since build n-1 (two builds' worth,
usually two syncs). No table is copied, readers of `analytics` (a lake's analysts) see the
previous build or the new one, never half of one, and a failed build leaves `analytics`
as it was; the spare costs the disk of a second copy of those tables.

A spare is extended only when the same SQL made it. Its row of
``staging.incremental_state`` (written by the model's post-hook in the model's own
transaction: the latest successful sync of each namespace it read, its watermark) holds
the :func:`fingerprints` of the SQL it was built with: the model's and its upstream
models' SQL, columns and configuration, the project's macros, the raw sources' declared
columns, the build parameters it reads (``changes``: ``expiring_within_days``), and the
DuckDB and dbt versions. :func:`drop_stale_spares` drops a spare whose fingerprint
differs (an upgrade, another expiry window) or is unknown before dbt runs, so dbt builds
that model in full; ``--full-refresh`` builds every one in full.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from importlib import metadata
from typing import Any

import duckdb

from ..warehouse.sql import sql_identifier, sql_string
from .dbt import ANALYTICS_SCHEMA, BUILD_SUFFIX

__all__ = [
    "STATE_TABLE",
    "Built",
    "HistoryTable",
    "built_tables",
    "drop_stale_spares",
    "form_bytes_to_read",
    "history_rows",
    "fingerprints",
    "history_tables",
    "incremental_models",
    "rename_state",
]

#: Each incremental table's watermark and fingerprint (``sql/macros/incremental.sql``).
STATE_TABLE = "staging.incremental_state"
_STATE_COLUMNS = "relation varchar, fingerprint varchar, watermarks varchar, built_at timestamptz"
#: The project's macros that read a build parameter, and that parameter (a dbt var).
_PARAMETER_MACROS = {"expiring_within_days": "expiring_within_days", "as_of": "as_of", "time_zone": "time_zone"}


@dataclass(frozen=True)
class HistoryTable:
    """An incremental model's table: the columns dbt replaces its rows by (`unique_key`)
    and those that say at which sync a row was last made (meta `boundaries`)."""

    unique_key: tuple[str, ...]
    boundaries: tuple[str, ...]


@dataclass(frozen=True)
class Built:
    """A table's row of ``staging.incremental_state``: what built it."""

    fingerprint: str | None
    #: namespace -> the latest successful sync it held, as UTC text (see the macros)
    watermarks: dict[str, str]
    built_at: datetime


def history_tables(manifest: Any) -> dict[str, HistoryTable]:
    """The incremental models' tables, by model name."""
    tables = {}
    for node in _models(manifest):
        if getattr(node.config, "materialized", None) != "incremental":
            continue
        key = node.config.unique_key
        tables[node.name] = HistoryTable(
            unique_key=(key,) if isinstance(key, str) else tuple(key or ()),
            boundaries=tuple((node.config.meta or {}).get("boundaries") or ()),
        )
    return tables


def built_tables(con: duckdb.DuckDBPyConnection, catalog: str | None = None) -> dict[str, Built]:
    """What built each table of `analytics` that has a state row, by table name (none
    before the first build)."""
    where = f"{sql_identifier(catalog)}." if catalog else ""
    exists = con.execute(
        "select count(*) from duckdb_tables() where schema_name = 'staging' and table_name = "
        f"'incremental_state' and database_name = {sql_string(catalog) if catalog else 'current_database()'}"
    ).fetchone()[0]  # type: ignore[index]
    if not exists:
        return {}
    return {relation: Built(fingerprint, json.loads(watermarks or "{}"), built_at)
            for relation, fingerprint, watermarks, built_at in con.execute(
                f"select relation, fingerprint, watermarks, built_at from {where}{STATE_TABLE}").fetchall()}


def incremental_models(manifest: Any) -> list[str]:
    """The names of the project's incremental models, in the manifest's order."""
    return [node.name for node in _models(manifest)
            if getattr(node.config, "materialized", None) == "incremental"]


def fingerprints(manifest: Any, variables: Mapping[str, Any]) -> dict[str, str]:
    """The fingerprint of the SQL each incremental model is built with (see the module
    docstring), by model name; `variables` are the build's dbt vars."""
    project = manifest.metadata.project_name if getattr(manifest, "metadata", None) else "diligence"
    macros = sorted((uid, _digest(macro.macro_sql)) for uid, macro in manifest.macros.items()
                    if macro.package_name == project)
    sources = sorted((uid, sorted((name, column.data_type) for name, column in source.columns.items()))
                     for uid, source in manifest.sources.items() if source.package_name == project)
    versions = {name: _version(name) for name in ("duckdb", "dbt-core", "dbt-duckdb")}
    result: dict[str, str] = {}
    for node in _models(manifest):
        if getattr(node.config, "materialized", None) != "incremental":
            continue
        upstream = _upstream(manifest, node.unique_id)
        used = {macro for uid in upstream for macro in manifest.nodes[uid].depends_on.macros}
        parameters = {var: variables.get(var) for macro, var in _PARAMETER_MACROS.items()
                      if f"macro.{project}.{macro}" in used}
        described = [_node_digest(manifest.nodes[uid]) for uid in sorted(upstream)]
        text = json.dumps([described, macros, sources, parameters, versions], sort_keys=True, default=str)
        result[node.name] = _digest(text)
    return result


def drop_stale_spares(con: duckdb.DuckDBPyConnection, current: Mapping[str, str]) -> list[str]:
    """Before a build: drop each spare ``analytics.<name>__build`` of the models
    `current` (name -> fingerprint) whose recorded fingerprint differs or is unknown, and
    its state. Returns the models the build will make in full (no spare left)."""
    con.execute("create schema if not exists staging")
    con.execute(f"create table if not exists {STATE_TABLE} ({_STATE_COLUMNS})")
    recorded = dict(con.execute(f"select relation, fingerprint from {STATE_TABLE}").fetchall())
    present = _tables(con)
    in_full = []
    for name, fingerprint in current.items():
        spare = name + BUILD_SUFFIX
        if spare in present and recorded.get(spare) == fingerprint:
            continue
        in_full.append(name)
        if spare in present:
            con.execute(f"drop table {ANALYTICS_SCHEMA}.{sql_identifier(spare)}")
        con.execute(f"delete from {STATE_TABLE} where relation = {sql_string(spare)}")
    return in_full


def form_bytes_to_read(con: duckdb.DuckDBPyConnection, in_full: bool) -> int:
    """About how many bytes of questionnaire forms a build parses: the current
    questionnaires', and the history's versions since the spares' earliest watermark
    (every version when a history mart builds `in_full`). Counted on the versions' times
    and a sample of the forms' sizes, without reading every form."""
    tables = {row[0] for row in con.execute(
        "select table_name from duckdb_tables() where database_name = current_database() "
        "and schema_name = 'raw'").fetchall()}
    if "questionnaires" not in tables:
        return 0
    columns = {row[0] for row in con.execute(
        "select column_name from duckdb_columns() where database_name = current_database() "
        "and schema_name = 'raw' and table_name = 'questionnaires'").fetchall()}
    if not {"forms_json", "_dlt_valid_from", "_dlt_valid_to"} <= columns:
        return 0
    read = "true"
    if not in_full:
        marks = [mark for built in built_tables(con).values() for mark in built.watermarks.values()]
        if marks:
            since = f"cast({sql_string(min(marks))} as timestamptz)"
            read = f"_dlt_valid_to is null or _dlt_valid_from > {since} or _dlt_valid_to > {since}"
    versions = con.execute(f"select count(*) from raw.questionnaires where {read}").fetchone()[0]  # type: ignore[index]
    sample = con.execute(
        "select avg(strlen(forms_json)) from raw.questionnaires tablesample 2 percent (system)"
    ).fetchone()[0]  # type: ignore[index]
    if sample is None:  # a small table: the sample may take no vector of it
        sample = con.execute("select avg(strlen(forms_json)) from "
                             "(from raw.questionnaires limit 2048)").fetchone()[0]  # type: ignore[index]
    return int(versions * (sample or 0))


def history_rows(con: duckdb.DuckDBPyConnection, models: Iterable[str]) -> int:
    """About how many rows of the history marts (`models`) a build reads: per model the
    larger of its published table and its spare (DuckDB's own count, read from the
    catalog, not the tables)."""
    names = [name for model in models for name in (model, model + BUILD_SUFFIX)]
    if not names:
        return 0
    sizes: dict[str, int] = {}
    for table, size in con.execute(
        "select table_name, estimated_size from duckdb_tables() where database_name = current_database() "
        f"and schema_name = '{ANALYTICS_SCHEMA}' and table_name in ({', '.join(sql_string(n) for n in names)})"
    ).fetchall():
        model = table.removesuffix(BUILD_SUFFIX)
        sizes[model] = max(sizes.get(model, 0), int(size or 0))
    return sum(sizes.values())


def rename_state(con: duckdb.DuckDBPyConnection, swapped: Iterable[str]) -> None:
    """In the swap's transaction: the state rows follow the tables, `<name>` and
    `<name>__build` trading places for every model of `swapped`; a state row whose
    table is gone is dropped."""
    con.execute(f"create table if not exists {STATE_TABLE} ({_STATE_COLUMNS})")
    for name in swapped:
        spare = name + BUILD_SUFFIX
        con.execute(
            f"update {STATE_TABLE} set relation = case relation when {sql_string(name)} "
            f"then {sql_string(spare)} else {sql_string(name)} end "
            f"where relation in ({sql_string(name)}, {sql_string(spare)})"
        )
    present = _tables(con)
    con.execute(f"delete from {STATE_TABLE} where relation not in "
                f"({', '.join(sql_string(t) for t in sorted(present)) or 'null'})")


def _models(manifest: Any) -> list[Any]:
    return [node for node in manifest.nodes.values()
            if getattr(node.resource_type, "value", str(node.resource_type)) == "model"]


def _upstream(manifest: Any, unique_id: str) -> set[str]:
    """`unique_id` and every model above it (sources are fingerprinted apart)."""
    seen: set[str] = set()
    stack = [unique_id]
    while stack:
        uid = stack.pop()
        if uid in seen or uid not in manifest.nodes:
            continue
        seen.add(uid)
        stack.extend(manifest.nodes[uid].depends_on.nodes)
    return seen


def _node_digest(node: Any) -> list[Any]:
    config = node.config
    return [
        node.unique_id,
        node.checksum.checksum,
        sorted((name, column.data_type) for name, column in node.columns.items()),
        [getattr(config, key, None) for key in ("materialized", "unique_key", "incremental_strategy")],
    ]


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {row[0] for row in con.execute(
        "select table_name from duckdb_tables() where database_name = current_database() "
        f"and schema_name = {sql_string(ANALYTICS_SCHEMA)}").fetchall()}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return ""
