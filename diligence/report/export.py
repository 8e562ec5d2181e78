"""Export the analyst reports from schema `analytics` as CSV or Parquet files.

One file per report, `<report>.<ext>`, written with DuckDB `COPY ... TO` to a hidden
temporary name in the output directory and then renamed over the final name, so a
reader never sees a half-written file. The reports are read through the step's session
of the warehouse (read-only unless the step holds it for writing). Which folder that is
(a new one per run under the reports root, or exactly `--out`) is decided in
:mod:`diligence.report.folders`.

CSV: UTF-8, comma-separated, one header row, timestamps in UTC. List columns
(`selected_option_ids`, `given_company_type_ids`, ...) are written as JSON arrays
(`["A; B","C"]`), so a value that itself contains the separator stays one value; an
empty list is `[]` and NULL an empty cell. Parquet keeps list columns as lists.

CSV formula guard: the text in these files is written by counterparties, and a
spreadsheet runs a cell that begins with `=`, `+`, `-`, `@`, a tab or a carriage
return as a formula (CSV injection). Unless `csv_raw` is set, such a text cell is
written with a leading `'`, which spreadsheets show as text. Only text columns are
touched, in SQL inside the `COPY`: numbers, dates and booleans stay as they are, and a
list column's cell begins with `[`, so it is never a trigger. Parquet keeps every
value exactly as received.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import WarehouseNotReadyError
from ..warehouse.filemodes import make_dirs, protect, write_text_atomically
from ..warehouse.sql import sql_identifier, sql_string

if TYPE_CHECKING:  # the session's type only: the CLI reads Format without loading DuckDB
    import duckdb


class Format(StrEnum):
    """The export formats, the one list of them: the CLI's `--format`, the flows'
    `export_formats` and the demo ask it. A member is its file extension."""

    csv = "csv"
    parquet = "parquet"


#: Characters that make a spreadsheet read a cell as a formula (OWASP CSV injection).
FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")

# report -> columns to sort by, so that files are reproducible
REPORTS: dict[str, tuple[str, ...]] = {
    "answers": (
        "namespace_company_id",
        "company_id",
        "company_type_id",
        "form_position",
        "field_position",
        "field_id",
    ),
    "document_expiry": ("namespace_company_id", "company_id", "company_type_id", "document_id"),
    "questionnaire_completeness": ("namespace_company_id", "company_id", "company_type_id"),
    "connections": ("namespace_company_id", "company_id"),
    "answers_wide": ("namespace_company_id", "company_id", "company_type_id"),
}


#: What an export of the register as of a date (``--as-of``) carries beside its files:
#: the moment, the sync it stands on, the evidence head, each file's SHA-256
#: (``diligence verify DIR`` checks it, see :mod:`diligence.audit.register_verify`).
REGISTER_FILE = "register.json"
REGISTER_VERSION = 1


@dataclass(frozen=True)
class ExportedFile:
    report: str
    path: Path
    rows: int


@dataclass(frozen=True)
class ExportResult:
    """One export: the folder it wrote (a run folder, or `--out`) and each file in it."""

    folder: Path
    files: list[ExportedFile]


def export_reports(
    con: duckdb.DuckDBPyConnection,
    out_dir: Path,
    fmt: Format | str,
    *,
    label: str | None = None,
    csv_raw: bool = False,
) -> list[ExportedFile]:
    """Write every report to `out_dir/<report>.<fmt>`; return the files written.
    `con` is the step's open session of the warehouse (``Warehouse.session``), which the
    caller closes; `label` names its warehouse in errors. `csv_raw` writes CSV text cells
    without the formula guard (for machine consumers)."""
    try:
        fmt = Format(fmt)
    except ValueError:
        expected = " or ".join(repr(known.value) for known in Format)
        raise ValueError(f"unknown export format {fmt!r}; expected {expected}") from None
    command = f"diligence models --warehouse {label}" if label else "diligence models"
    return _export_all(con, Path(out_dir), fmt, command, csv_raw)


def _export_all(
    con: duckdb.DuckDBPyConnection,
    out_dir: Path,
    fmt: Format,
    models_command: str = "diligence models",
    csv_raw: bool = False,
) -> list[ExportedFile]:
    require_reports(con, models_command)
    out_dir = make_dirs(Path(out_dir))
    exported: list[ExportedFile] = []
    con.execute("set TimeZone = 'UTC'")
    for report, order_by in REPORTS.items():
        path = out_dir / f"{report}.{fmt}"
        rows = _export_one(con, report, order_by, path, fmt, csv_raw)
        exported.append(ExportedFile(report=report, path=path, rows=rows))
    return exported


def require_reports(con: duckdb.DuckDBPyConnection, models_command: str = "diligence models") -> None:
    """Raise :class:`WarehouseNotReadyError` naming the reports' tables that are missing
    (the models were never built), with the command that builds them."""
    missing = [report for report in REPORTS if not _table_exists(con, report)]
    if missing:
        raise WarehouseNotReadyError(
            f"no analytics tables yet ({', '.join(missing)} missing): run `{models_command}` first"
        )


def last_sync_id(con: duckdb.DuckDBPyConnection) -> str | None:
    """The id of the last successful sync in ``analytics.sync_runs``, the data the reports
    hold (an export's run folder is named after it), or None when there is none."""
    if not _table_exists(con, "sync_runs"):
        return None
    row = con.execute(
        "select arg_max(sync_id, synced_at) from analytics.sync_runs where status = 'success'"
    ).fetchone()
    return str(row[0]) if row and row[0] is not None else None


def _export_one(
    con: duckdb.DuckDBPyConnection,
    report: str,
    order_by: tuple[str, ...],
    path: Path,
    fmt: Format,
    csv_raw: bool = False,
) -> int:
    columns = con.execute(
        "select column_name, data_type from information_schema.columns "
        "where table_schema = 'analytics' and table_name = ? order by ordinal_position", [report]
    ).fetchall()
    select_list = ", ".join(
        _select_expression(name, data_type, fmt, csv_raw) for name, data_type in columns
    )
    query = f"select {select_list} from analytics.{report} order by {', '.join(order_by)}"
    options = (
        "format csv, header true, delimiter ','"
        if fmt == Format.csv
        else ("format parquet, compression zstd")
    )
    tmp_path = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        result = con.execute(f"copy ({query}) to {sql_string(str(tmp_path))} ({options})")
        rows = int(result.fetchone()[0])
        protect(tmp_path)  # confidential answers: owner-only (or group) before visible
        os.replace(tmp_path, path)
    finally:
        tmp_path.unlink(missing_ok=True)
    return rows


def _select_expression(name: str, data_type: str, fmt: Format, csv_raw: bool = False) -> str:
    column = sql_identifier(name)
    if fmt == Format.csv and data_type.endswith("[]"):
        # JSON array text: begins with `[`, never a formula trigger
        return f"cast(to_json({column}) as varchar) as {column}"
    if fmt == Format.csv and not csv_raw and data_type == "VARCHAR":
        triggers = sql_string("".join(FORMULA_TRIGGERS))
        return (
            f"case when {column} <> '' and contains({triggers}, left({column}, 1)) "
            f"then {sql_string(chr(39))} || {column} else {column} end as {column}"
        )
    return column


def _table_exists(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    row = con.execute(
        "select count(*) from information_schema.tables "
        "where table_schema = 'analytics' and table_name = ?", [table]
    ).fetchone()
    return bool(row and row[0])


def write_register_manifest(folder: Path, files: list[ExportedFile], facts: dict[str, object]) -> Path:
    """Write ``register.json`` into the export `folder`: `facts` (the moment, the sync, the
    evidence head) and the SHA-256 of each of `files`, read back from disk."""
    listed = {}
    for exported in files:
        digest = hashlib.sha256()
        with open(folder / exported.path.name, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        listed[exported.path.name] = {"sha256": digest.hexdigest(), "rows": exported.rows}
    return write_text_atomically(folder / REGISTER_FILE, json.dumps(
        {"register": REGISTER_VERSION, **facts, "files": listed}, indent=2) + "\n")
