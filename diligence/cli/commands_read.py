"""The commands that read the warehouse and write nothing into it: `dbt-profile`, `docs`,
`export`, `status`, `report`.

Each opens the warehouse of the options (env, config), checks it holds data, calls one
function (:mod:`diligence.steps`, :mod:`diligence.cli.status`, :mod:`diligence.analytics`)
and prints what it wrote. `changes` (:mod:`diligence.cli.changes`) reads it too.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from ..errors import CommandError
from ..report.export import Format
from .base import (
    EXIT_USAGE,
    AsOfOption,
    DataPathOption,
    EvidenceOption,
    WarehouseOption,
    _no_warehouse,
    _parse_as_of,
    _quiet,
    _require_data,
    _say,
    _warehouse,
    app,
    err,
    handle_errors,
    out,
    out_option,
)

__all__ = ["dbt_profile", "docs", "export", "report", "status"]


@app.command("dbt-profile")
@handle_errors
def dbt_profile(
    warehouse: WarehouseOption = None,
    data_path: DataPathOption = None,
    out_file: Annotated[Path | None, out_option(
        "Add (or replace) the `diligence` profile in this profiles.yml, keeping its other "
        "profiles, instead of printing it.")] = None,
) -> None:
    """Print a dbt profiles.yml for the warehouse in use, for your own dbt runs in sql/
    (`cd sql && dbt build --select custom`), or merge it into one with --out. It holds no
    password: a lake's catalog password comes from PGPASSWORD."""
    # start-up (dbt 2.1 s of imports): dbt loads when a command runs
    from ..analytics.dbt import merge_profile, profile_yaml

    owner = _warehouse(warehouse, data_path)
    if out_file is None:
        sys.stdout.write(profile_yaml(owner.location))
        return
    _say(f"profile `diligence` written into {merge_profile(out_file, owner.location)}")


@app.command()
@handle_errors
def docs(
    warehouse: WarehouseOption = None,
    data_path: DataPathOption = None,
    out_dir: Annotated[Path, out_option("Folder for the docs site.")] = Path("reports/dbt-docs"),
) -> None:
    """Generate dbt's docs site (every model, column, test and source, with the lineage
    graph) as one self-contained index.html: open it from disk, no server needed."""
    from ..analytics.dbt_docs import (
        generate_docs,  # start-up (dbt 2.1 s of imports): dbt loads when a command runs
    )

    owner = _warehouse(warehouse, data_path)
    _require_data(owner)
    site = generate_docs(owner, out_dir)
    out.print(f"dbt docs: {site}", highlight=False)


@app.command()
@handle_errors
def export(
    format: Annotated[
        str, typer.Option("--format", "-f", metavar=f"<{'|'.join(Format)}>", help=f"{' or '.join(Format)}.")
    ] = Format.csv.value,
    out_dir: Annotated[Path | None, out_option(
        "Write exactly into this folder, replacing an earlier export there whole (default: "
        "a new folder per run under reports/, named by reports/latest).")] = None,
    warehouse: WarehouseOption = None,
    data_path: DataPathOption = None,
    csv_raw: Annotated[
        bool,
        typer.Option(
            "--csv-raw",
            help="Write CSV text as received, without the quote before a leading =, +, -, @, "
            "tab or CR (for machine consumers; also [export] csv_raw in config).",
        ),
    ] = False,
    as_of: AsOfOption = None,
) -> None:
    """Write answers, document_expiry, questionnaire_completeness, connections and
    answers_wide as <report>.<csv|parquet>, into a new folder per run under reports/
    (<date>T<time>Z-<sync id>, UTC; reports/latest names the newest, [exports] keep of
    them are kept, default 30) or exactly into --out. CSV text cells that begin with =, +,
    -, @, a tab or CR get a leading ' so that spreadsheets do not run them as formulas.
    With --as-of, the reports as the warehouse knew them then (the register as of a date,
    built aside: `analytics` stays as it is), with register.json: the moment, the sync,
    the evidence head and each file's SHA-256 (`diligence verify DIR -w WAREHOUSE`)."""
    from ..steps import (
        export_step,  # start-up (DuckDB 0.13 s of imports): DuckDB loads when a command runs
    )

    try:
        fmt = Format(format)
    except ValueError:
        expected = " or ".join(Format)
        raise CommandError(f"--format must be {expected}, not {format!r}", EXIT_USAGE) from None
    owner = _warehouse(warehouse, data_path)
    _require_data(owner)
    with _as_of(owner, as_of) as (reading, register):
        result = export_step(reading, out_dir, [fmt], csv_raw=csv_raw, register=register)
    if _quiet():
        out.print(f"exported {len(result.files)} reports ({fmt}) into {result.folder}", highlight=False)
        return
    for exported in result.files:
        out.print(f"{exported.path}  ({exported.rows} rows)", highlight=False)


@app.command()
@handle_errors
def status(
    warehouse: WarehouseOption = None,
    data_path: DataPathOption = None,
    evidence: EvidenceOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the status as one JSON object (keys in docs/cli.md).")
    ] = False,
    sources: Annotated[
        bool,
        typer.Option("--sources", help="Also the freshness of each raw table by `dbt source freshness` (a few seconds)."),
    ] = False,
) -> None:
    """Last syncs with their outcome, row counts per table, open sync issues, freshness,
    failed sync attempts, and whether a sync is running now."""
    # start-up (dbt 2.1 s of imports): DuckDB and dbt load when the command runs
    from ..evidence.bucket import pull_chain_of
    from .status import (
        collect_status,
        evidence_status,
        render_status,
        resumable_status,
        source_freshness_status,
    )

    owner = _warehouse(warehouse, data_path, evidence)
    if owner.is_lake:
        _require_data(owner)
    data = collect_status(owner)
    # an evidence store in a bucket: its chain copied in first, so that the head and the
    # counts are the bucket's, not this machine's last sync's
    unread = pull_chain_of(owner)
    if unread is not None:
        err.print(f"warning: {unread}; the evidence shown is this machine's copy",
                  highlight=False, markup=False)
    data["resumable"] = resumable_status(owner)
    data["evidence"] = evidence_status(owner)
    if sources and data["state"] == "ready":
        data["sources"] = source_freshness_status(owner)
    if data["state"] == "missing" and not data["failed_attempts"] and not data["resumable"]:
        if as_json:
            out.print(json.dumps(data), highlight=False, markup=False, soft_wrap=True)
        raise _no_warehouse(owner)
    if as_json:
        out.print(json.dumps(data), highlight=False, markup=False, soft_wrap=True)
    else:
        render_status(owner.display(), out, data)


@app.command()
@handle_errors
def report(
    warehouse: WarehouseOption = None,
    data_path: DataPathOption = None,
    out_file: Annotated[Path, out_option("HTML file to write.")] = Path("reports/report.html"),
    as_of: AsOfOption = None,
) -> None:
    """Write one self-contained HTML report of the warehouse (opens without network).

    Headline numbers, documents expired/expiring on a timeline, completeness per
    counterparty, what changed since the previous sync and open sync issues. With
    --as-of, as the warehouse knew it then (`analytics` stays as it is).
    """
    # start-up (altair 0.3 s of imports): DuckDB, altair and jinja2 load when the command runs
    from ..steps import report_step

    owner = _warehouse(warehouse, data_path)
    if not owner.exists():
        raise _no_warehouse(owner)
    with _as_of(owner, as_of) as (reading, _register):
        result = report_step(reading, out_file)
    out.print(f"report: {result.path}  ({result.bytes / 1e6:.1f} MB)", highlight=False)


@contextlib.contextmanager
def _as_of(owner: Any, as_of: str | None) -> Iterator[tuple[Any, Any]]:
    """(`owner`, None), or with `as_of` the register as of then, built aside for the
    command, and what built it (its line says which sync it stands on)."""
    when = _parse_as_of(as_of)
    if when is None:
        yield owner, None
        return
    from ..steps import register_of  # start-up: see export

    with register_of(owner, when) as (register, built):
        out.print(f"as of {built.as_of.isoformat()}: the warehouse as the sync of "
                  f"{built.synced_at.isoformat()} left it", highlight=False)
        yield register, built
