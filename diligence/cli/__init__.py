"""The `diligence` command line: thin wrappers over the steps the Prefect flow runs too.

Every command that writes the warehouse goes through :mod:`diligence.steps`. The
`schedule` command needs the Prefect flow, so it is added from above, by the entry
module :mod:`entry` (``diligence`` and ``python -m diligence`` run that one):
nothing in ``diligence/`` imports ``flows/``. Module-level imports stay light
(typer, rich, the standard library).

Errors are one or a few clear lines on stderr and a non-zero exit code; pass
``--debug`` (before the command) for a traceback. Secrets never reach the output.
Off a terminal nothing is wrapped or truncated (:mod:`diligence.cli.consoles`).
``--quiet`` prints errors and one final line; ``--verbose`` logs our debug lines.

The logic of each convenience lives in its own module (``check``, ``select``,
``summary``, ``status``, ``attempts``, ``hints``, ``schedule_check``); the commands
here only parse, call and print.
"""


from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any

import typer

from ..config import DEMO_WAREHOUSE
from ..errors import CommandError, SelectError
from ..safe_text import console_text
from ..warehouse import DEFAULT_WAREHOUSE
from ..warehouse.migrate import migrate_warehouse as migrate
from . import changes as _changes_command  # noqa: F401 - registers changes
from . import evidence as _evidence_commands  # noqa: F401 - registers verify, evidence, replay
from .base import (
    _AS_OF_SLACK,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    DataPathOption,
    EvidenceOption,
    WarehouseOption,
    _expiring_default,
    _no_warehouse,
    _parse_as_of,
    _password_from_stdin,
    _quiet,
    _require_data,
    _say,
    _state,
    _warehouse,
    app,
    err,
    handle_errors,
    out,
)
from .progress import SyncProgress
from .select import parse_select
from .summary import run_summary, write_summary

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_USAGE", "CommandError", "app", "err", "handle_errors", "out"]

# -- sync ------------------------------------------------------------------------------
@app.command()
@handle_errors
def sync(
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="Service URL (default: dlt config base_url).")
    ] = None,
    warehouse: WarehouseOption = None,
    data_path: DataPathOption = None,
    evidence: EvidenceOption = None,
    namespace: Annotated[
        list[str] | None,
        typer.Option("--namespace", "-n", help="Company ID to sync; repeat for several (default: all)."),
    ] = None,
    no_models: Annotated[bool, typer.Option("--no-models", help="Skip building the models.")] = False,
    download_documents: Annotated[
        Path | None,
        typer.Option(
            "--download-documents",
            help="Also download new or changed document files into this folder.",
        ),
    ] = None,
    max_concurrency: Annotated[
        int | None, typer.Option(help="Requests in flight at once (default: config, 16).", min=1)
    ] = None,
    wait: Annotated[
        float, typer.Option(help="Seconds to wait for another sync on the same warehouse.", min=0)
    ] = 0.0,
    select: Annotated[
        list[str] | None,
        typer.Option(
            "--select",
            help="Load only these resources, e.g. documents,questionnaires; the others are left "
            "as they are (nothing of them retired). After a first full sync.",
        ),
    ] = None,
    json_summary: Annotated[
        Path | None,
        typer.Option("--json-summary", help="Write a JSON run report (requests, retries, 429s, rows, "
                     "issues, durations per namespace) to this file."),
    ] = None,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from standard input.")
    ] = False,
    restart: Annotated[
        bool, typer.Option("--restart", help="Start from zero: discard what an interrupted sync "
                           "left to resume (its unsealed manifest), and read every namespace again.")
    ] = False,
) -> None:
    """Sync every namespace into the raw dataset, then build the models.

    Exits 0 when every namespace was read completely (denied or missing items are
    recorded in sync_issues), non-zero on bad credentials, an unreachable service,
    or a namespace that could not be read completely (it is named, and its previous
    data is kept). A sync that loaded nothing builds and publishes nothing.
    """
    from ..analytics.checks import format_failures  # start-up: the models load when a command runs
    from ..steps import run_pipeline
    from ..sync import source_settings

    owner = _warehouse(warehouse, data_path, evidence)
    try:
        resources = parse_select(select)
    except SelectError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
    if resources is not None and not owner.synced_namespaces():
        raise CommandError(
            f"--select needs a warehouse filled by a full sync first; run `diligence sync "
            f"--warehouse {owner.display()}` without --select once", EXIT_USAGE
        )
    settings = source_settings(
        base_url=base_url, namespaces=namespace or None, max_concurrency=max_concurrency,
        password=_password_from_stdin(password_stdin),
    )
    interval = 1.0 if _state["verbosity"] > 0 else 5.0
    with SyncProgress(console=err, interval=interval, enabled=not _quiet()) as progress:
        try:
            result = run_pipeline(
                owner,
                settings=settings,
                progress=progress,
                on_synced=lambda synced: (progress.stop(), _print_sync(synced)),
                download_to=download_documents,
                models=not no_models,
                expiring_within_days=_expiring_default() if not no_models else None,
                wait_seconds=wait,
                resources=resources,
                restart=restart,
            )
        except KeyboardInterrupt:
            progress.stop()
            err.print(progress.interrupted_line(), highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_INTERRUPTED) from None
    assert result.sync is not None
    _print_waited(result.waited_seconds, owner.display())
    if json_summary is not None:
        write_summary(run_summary(result), json_summary)
    if result.nothing_loaded:
        _nothing_loaded(result.sync)
        return
    if result.downloads is not None and not _quiet():
        _print_downloads(result.downloads, download_documents)
    if result.analytics is not None and not _quiet():
        _print_analytics(result.analytics)
    if result.downloads is not None and result.downloads.failed:
        raise CommandError(f"{result.downloads.failed} document downloads failed (see the log above)")
    if result.analytics is not None and result.analytics.failed_checks:
        raise CommandError(format_failures(result.analytics.failed_checks))
    if result.sync.failed:
        names = ", ".join(f"{o.namespace_company_id} ({o.error})" for o in result.sync.failed)
        raise CommandError(f"not loaded, previous data kept: {names}")
    if _quiet():
        out.print(_final_line(result), highlight=False)


def _nothing_loaded(sync: Any) -> None:
    """One line for a sync that loaded no namespace: nothing was built or published."""
    if not sync.namespaces:
        out.print("nothing to sync: no namespace; nothing built or published", highlight=False)
        return
    names = ", ".join(f"{o.namespace_company_id} ({o.error})" for o in sync.failed)
    raise CommandError(f"nothing loaded, nothing built or published, previous data kept: {names}")


def _final_line(result: Any) -> str:
    sync = result.sync
    line = (
        f"synced {len(sync.namespaces) - len(sync.failed)}/{len(sync.namespaces)} namespaces "
        f"into {sync.warehouse} in {sync.seconds:.1f}s"
    )
    if result.analytics is not None:
        line += f"; models built, analysts' copy: {result.analytics.published}"
    return line


def _print_waited(seconds: float, warehouse: Path | str) -> None:
    if seconds and not _quiet():
        err.print(f"waited {seconds:.1f}s for another writer of {warehouse} to finish", highlight=False)


def _print_sync(result: Any) -> None:
    if _quiet() or not any(o.status == "success" for o in result.namespaces):
        return  # --quiet: one final line; nothing loaded: one error line
    for outcome in result.namespaces:
        mark = "ok" if outcome.status == "success" else "FAILED"
        resumed = ""
        if outcome.requests_kept:
            since = f" from {outcome.kept_since.astimezone():%H:%M}" if outcome.kept_since else ""
            resumed = (f"; resumed: {outcome.requests_kept:,} of "
                       f"{outcome.requests_kept + outcome.requests:,} requests kept{since}")
        out.print(
            f"{mark:6} {console_text(outcome.namespace_company_id)}: {outcome.requests} requests, "
            f"{outcome.rows} rows, {outcome.issues} sync issues, {outcome.duration_seconds:.1f}s{resumed}",
            highlight=False,
        )
    selected = f" (only {', '.join(result.resources)})" if getattr(result, "resources", None) else ""
    out.print(
        f"synced {len(result.namespaces) - len(result.failed)}/{len(result.namespaces)} namespaces"
        f"{selected} into {result.warehouse} in {result.seconds:.1f}s",
        highlight=False,
    )
    if getattr(result, "evidence_head", None):
        broken = "; the chain was broken before it (recorded: see `diligence verify`)" \
            if result.evidence_break else ""
        out.print(f"evidence sealed: head {result.evidence_head}{broken}", highlight=False)


def _print_downloads(result: Any, folder: Path | None) -> None:
    out.print(
        f"documents: {result.downloaded} downloaded, {result.unchanged} unchanged, "
        f"{result.failed} failed, into {folder}",
        highlight=False,
    )


def _print_analytics(result: Any) -> None:
    out.print(
        f"models built in {result.models.seconds:.2f}s: "
        + ", ".join(f"{table} {rows}" for table, rows in result.models.row_counts.items()),
        highlight=False,
    )
    if not result.failed_checks:
        copy = result.published or "none (a lake: analysts ATTACH it read-only)"
        out.print(f"all data checks passed; analysts' copy: {copy}", highlight=False)


def _build_models(warehouse: Any, expiring_within_days: int, as_of: datetime | None, wait: float = 0.0) -> None:
    from ..analytics.checks import format_failures  # start-up: dlt and dbt load when a command runs
    from ..steps import run_pipeline

    result = run_pipeline(
        warehouse, expiring_within_days=expiring_within_days, as_of=as_of, wait_seconds=wait
    )
    assert result.analytics is not None
    _print_waited(result.waited_seconds, warehouse.display())
    if _quiet():
        if not result.analytics.failed_checks:
            out.print(f"models built; analysts' copy: {result.analytics.published}", highlight=False)
    else:
        _print_analytics(result.analytics)
    if result.analytics.failed_checks:
        raise CommandError(format_failures(result.analytics.failed_checks))


# -- check -------------------------------------------------------------------------------
@app.command()
@handle_errors
def check(
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="Service URL (default: dlt config base_url).")
    ] = None,
    namespace: Annotated[
        list[str] | None,
        typer.Option("--namespace", "-n", help="Company ID to check; repeat for several (default: all)."),
    ] = None,
    password_stdin: Annotated[
        bool, typer.Option("--password-stdin", help="Read the password from standard input.")
    ] = False,
) -> None:
    """Check settings, credentials, base URL, namespaces and reading rights; load nothing.

    Logs in, reads user-info and each namespace's connections with their reading
    rights; never opens the warehouse. Exits non-zero with one line naming what to fix.
    """
    from ..sync import source_settings  # start-up: the client (httpx, dlt) loads here
    from .check import report_lines, run_check

    settings = source_settings(base_url=base_url, namespaces=namespace or None,
                               password=_password_from_stdin(password_stdin))
    report = run_check(settings)
    lines = report_lines(report)
    for line in lines if not _quiet() else lines[-1:]:
        out.print(line, highlight=False, markup=False)


# -- models / export -------------------------------------------------------------------
@app.command()
@handle_errors
def models(
    warehouse: WarehouseOption = None,
    data_path: DataPathOption = None,
    expiring_within_days: Annotated[
        int | None,
        typer.Option(help="Days ahead that count as 'expiring' (default: config, 30).", min=0),
    ] = None,
    as_of: Annotated[
        str | None,
        typer.Option(help="Compute expiry as of this UTC timestamp instead of now (reproducible)."),
    ] = None,
    wait: Annotated[
        float, typer.Option(help="Seconds to wait for a sync or session holding the warehouse.", min=0)
    ] = 0.0,
    publish: Annotated[
        bool,
        typer.Option("--publish", help="With --as-of in the past: publish that build to the analysts' copy anyway."),
    ] = False,
) -> None:
    """(Re)build the analytics schema from raw, in one transaction, then run the checks
    and publish the analysts' read-only copy (<warehouse>-analytics.duckdb; a lake has none).

    With --as-of in the past the build would replace the analysts' copy with expiry
    as of then: on a file warehouse it is refused unless --publish says so.
    """
    owner = _warehouse(warehouse, data_path)
    _require_data(owner, writing=True)
    days = _expiring_default() if expiring_within_days is None else expiring_within_days
    when = _parse_as_of(as_of)
    past = when is not None and when < datetime.now(timezone.utc) - _AS_OF_SLACK
    if past and not publish and not owner.is_lake:  # a lake has no analysts' copy to replace
        raise CommandError(
            f"--as-of {as_of} is in the past: the analysts' copy would show expiry as of then; "
            "pass --publish to build and publish it anyway", EXIT_USAGE
        )
    _build_models(owner, days, when, wait)


@app.command("dbt-profile")
@handle_errors
def dbt_profile(
    warehouse: WarehouseOption = None,
    data_path: DataPathOption = None,
    out_file: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Add (or replace) the `diligence` profile in this "
                     "profiles.yml, keeping its other profiles, instead of printing it."),
    ] = None,
) -> None:
    """Print a dbt profiles.yml for the warehouse in use, for your own dbt runs in sql/
    (`cd sql && dbt build --select custom`), or merge it into one with --out. It holds no
    password: a lake's catalog password comes from PGPASSWORD."""
    # start-up: dbt loads when a command runs
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
    out_dir: Annotated[
        Path, typer.Option("--out", "-o", help="Folder for the docs site.")
    ] = Path("reports/dbt-docs"),
) -> None:
    """Generate dbt's docs site (every model, column, test and source, with the lineage
    graph) as one self-contained index.html: open it from disk, no server needed."""
    from ..analytics.dbt_docs import generate_docs  # start-up: dbt loads when a command runs

    owner = _warehouse(warehouse, data_path)
    _require_data(owner)
    site = generate_docs(owner, out_dir)
    out.print(f"dbt docs: {site}", highlight=False)


@app.command()
@handle_errors
def export(
    format: Annotated[str, typer.Option("--format", "-f", help="csv or parquet.")] = "csv",
    out_dir: Annotated[Path, typer.Option("--out", "-o", help="Folder for the report files.")] = Path(
        "reports"
    ),
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
) -> None:
    """Write answers, document_expiry, questionnaire_completeness, connections and
    answers_wide as <report>.<csv|parquet>. CSV text cells that begin with =, +, -, @,
    a tab or CR get a leading ' so that spreadsheets do not run them as formulas."""
    from ..steps import export_step  # start-up: DuckDB loads when a command runs

    if format not in ("csv", "parquet"):
        raise CommandError(f"--format must be csv or parquet, not {format!r}", EXIT_USAGE)
    owner = _warehouse(warehouse, data_path)
    _require_data(owner)
    files = export_step(owner, out_dir, [format], csv_raw=csv_raw)
    if _quiet():
        out.print(f"exported {len(files)} reports ({format}) into {out_dir}", highlight=False)
        return
    for exported in files:
        out.print(f"{exported.path}  ({exported.rows} rows)", highlight=False)


# -- sandbox / demo / status --------------------------------------------------------------
@app.command()
@handle_errors
def sandbox(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0 picks a free one).")] = 8765,
    email: Annotated[str, typer.Option(help="Login e-mail the sandbox accepts.")] = "analyst@example.com",
    password: Annotated[
        str, typer.Option(help="Password the sandbox accepts (default: sandbox-password).")
    ] = "sandbox-password",
    scale: Annotated[str, typer.Option(help="small, medium or large.")] = "small",
    seed: Annotated[int, typer.Option(help="Seed of the generated data.")] = 7,
    hostile: Annotated[
        bool, typer.Option(help="Serve hostile counterparty text (formulas, escapes, HTML, traversal "
                           "names), an oversize document and a too deeply nested answer.")
    ] = False,
    drift: Annotated[
        bool, typer.Option(help="Add unknown field types, extra properties and missing expiry dates.")
    ] = False,
    page_size: Annotated[
        int | None, typer.Option(help="Page list endpoints with a Link header, N items a page.")
    ] = None,
    url_ttl: Annotated[float, typer.Option(help="Seconds a signed document URL stays valid.")] = 60.0,
    latency_ms: Annotated[float, typer.Option(help="Fixed latency added to every response (ms).")] = 0.0,
    jitter_ms: Annotated[float, typer.Option(help="Random extra latency, uniform 0..N ms.")] = 0.0,
    error_rate: Annotated[float, typer.Option(help="Share of requests answered 500/502/503.")] = 0.0,
    rate_limit: Annotated[
        float, typer.Option(help="Requests per second allowed; beyond: 429 with Retry-After.")
    ] = 0.0,
    token_lifetime: Annotated[
        int | None, typer.Option(help="Lifetime of issued tokens in seconds (default 7 days).")
    ] = None,
    malformed_rate: Annotated[
        float, typer.Option(help="Share of responses with a truncated or non-JSON body.")
    ] = 0.0,
    reset_rate: Annotated[float, typer.Option(help="Share of connections dropped mid-response.")] = 0.0,
    slow_rate: Annotated[float, typer.Option(help="Share of requests delayed by --slow-ms.")] = 0.0,
    slow_ms: Annotated[float, typer.Option(help="Delay of a latency spike (ms).")] = 0.0,
    rate_burst: Annotated[int, typer.Option(help="Token bucket size (0: the rate).")] = 0,
    quota: Annotated[int, typer.Option(help="Requests allowed per quota window; 0 = off.")] = 0,
    quota_window: Annotated[float, typer.Option(help="Length of a quota window (s).")] = 60.0,
    shed_every: Annotated[
        int, typer.Option(help="Answer 429 to every Nth request, whatever the rate; 0 = off.")
    ] = 0,
    shed_percent: Annotated[
        float, typer.Option(help="Answer 429 to this percentage of requests (random).")
    ] = 0.0,
    shed_retry_after: Annotated[int, typer.Option(help="Retry-After of a shed request (s).")] = 1,
    error_every: Annotated[int, typer.Option(help="Answer 503 to every Nth request; 0 = off.")] = 0,
    revoke_after_uses: Annotated[
        int, typer.Option(help="Revoke every token after N uses (token storms); 0 = off.")
    ] = 0,
) -> None:
    """Serve the built-in emulator of the service on 127.0.0.1 until Ctrl+C.

    It implements every endpoint and rule of the service's specification with
    deterministic data, and fault switches for testing. Admin routes under
    /_sandbox/ expose the ground truth (/_sandbox/truth) and change faults at run time.
    """
    # start-up: the sandbox's server (uvicorn) loads for `diligence sandbox` only
    from sandbox.faults import Faults
    from sandbox.server import serve

    if scale not in ("small", "medium", "large"):
        raise CommandError(f"--scale must be small, medium or large, not {scale!r}", EXIT_USAGE)
    faults = Faults()
    try:
        faults.update(
            {
                "latency_ms": latency_ms,
                "jitter_ms": jitter_ms,
                "error_rate": error_rate,
                "rate_limit": rate_limit,
                "token_lifetime": token_lifetime,
                "malformed_rate": malformed_rate,
                "reset_rate": reset_rate,
                "slow_rate": slow_rate,
                "slow_ms": slow_ms,
                "rate_burst": rate_burst,
                "quota": quota,
                "quota_window": quota_window,
                "shed_every": shed_every,
                "shed_percent": shed_percent,
                "shed_retry_after": shed_retry_after,
                "error_every": error_every,
                "revoke_after_uses": revoke_after_uses,
            }
        )
    except ValueError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
    serve(
        port,
        scale=scale,
        seed=seed,
        drift=drift,
        hostile=hostile,
        faults=faults,
        email=email,
        password=password,
        page_size=page_size,
        url_ttl_seconds=url_ttl,
    )


@app.command()
@handle_errors
def demo(
    scale: Annotated[str, typer.Option(help="Sandbox data size: small, medium or large.")] = "small",
    warehouse: Annotated[Path, typer.Option(help="Warehouse of the demo.")] = DEMO_WAREHOUSE,
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for the reports.")] = Path("reports"),
) -> None:
    """The whole job on the built-in sandbox: sandbox + sync + models + checks + export.

    Starts the sandbox on a free port, syncs every namespace into WAREHOUSE, builds
    the analytics schema, writes CSV and Parquet reports into OUT and prints a summary.
    """
    from .demo import run_demo  # start-up: the sandbox and the pipeline load for the demo only

    summary = run_demo(scale=scale, warehouse=warehouse, out_dir=out_dir, console=out, progress_console=err)
    out.print(summary)


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
    # start-up: DuckDB and dbt load when the command runs
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


# -- report ------------------------------------------------------------------------------
@app.command()
@handle_errors
def report(
    warehouse: WarehouseOption = None,
    data_path: DataPathOption = None,
    out_file: Annotated[
        Path, typer.Option("--out", "-o", help="HTML file to write.")
    ] = Path("reports/report.html"),
) -> None:
    """Write one self-contained HTML report of the warehouse (opens without network).

    Headline numbers, documents expired/expiring on a timeline, completeness per
    counterparty, what changed since the previous sync and open sync issues.
    """
    # start-up: DuckDB, altair and jinja2 load when the command runs
    from ..steps import report_step

    owner = _warehouse(warehouse, data_path)
    if not owner.exists():
        raise _no_warehouse(owner)
    result = report_step(owner, out_file)
    out.print(f"report: {result.path}  ({result.bytes / 1e6:.1f} MB)", highlight=False)


# -- migrate-warehouse ----------------------------------------------------------------------
@app.command("migrate-warehouse")
@handle_errors
def migrate_warehouse(
    warehouse: Annotated[
        Path, typer.Option("--warehouse", "-w", help="DuckDB file to convert.")
    ] = DEFAULT_WAREHOUSE,
    duckdb2_python: Annotated[
        str | None,
        typer.Option(help="A Python with duckdb==2.0.0 (default: uv's isolated environment)."),
    ] = None,
) -> None:
    """Convert a warehouse file written by DuckDB 2.0 (earlier releases) to the storage
    this release reads; the original is kept as <name>.duckdb2.bak."""
    result = migrate(warehouse, python=duckdb2_python)
    if not result.migrated:
        out.print(f"{warehouse} is already readable: nothing to do", highlight=False)
        return
    out.print(
        f"converted {warehouse} ({len(result.row_counts)} tables, "
        f"{sum(result.row_counts.values())} rows, counts verified) in {result.seconds:.1f}s; "
        f"the original is kept as {result.backup}",
        highlight=False,
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())
