"""`diligence demo`: the whole job against the built-in sandbox, with a short summary."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer

from ..config import DEMO_WAREHOUSE
from ..errors import SyncError
from ..report.export import Format
from ..steps import failure_message, report_step, run_pipeline, source_settings
from ..warehouse import Warehouse
from .progress import SyncProgress

SUMMARY_SQL = """
select namespace_count, counterparty_count, connection_count, questionnaire_count,
       answered_field_count, expired_document_count, expiring_document_count,
       own_document_count, own_expired_document_count, own_expiring_document_count,
       sync_issue_count
from analytics.headline
"""


def installed_command(name: str) -> str:
    """How to start the command `name` installed with this package: the one beside this
    Python (the project's .venv/bin/<name>), else `name` from PATH."""
    beside = Path(sys.executable).absolute().with_name(name)
    if not beside.exists():
        return name
    return str(beside.relative_to(Path.cwd())) if beside.is_relative_to(Path.cwd()) else str(beside)


def duckdb_cli() -> str:
    """How to start the DuckDB command line installed with this package."""
    return installed_command("duckdb")


def run_demo(
    *,
    scale: str = "small",
    warehouse: Path = DEMO_WAREHOUSE,
    out_dir: Path | None = None,
    console: Console | None = None,
    progress_console: Console | None = None,
) -> str:
    """Start the sandbox, sync it into `warehouse`, build models, export, write the HTML
    report beside the exports; return a summary. The files go into a new run folder
    under ``reports/`` (``reports/latest`` names it), or exactly into `out_dir`
    (:func:`diligence.steps.export_step`)."""
    console = console or Console()
    owner = Warehouse(warehouse)
    with SandboxServer(scale=scale) as sandbox:
        console.print(f"sandbox serving {scale} data at {sandbox.base_url}", highlight=False)
        with SyncProgress(console=progress_console or Console(stderr=True)) as progress:
            done = run_pipeline(
                owner,
                settings=source_settings(
                    base_url=sandbox.base_url, email=DEFAULT_EMAIL, password=DEFAULT_PASSWORD
                ),
                progress=progress,
                on_synced=lambda _: progress.stop(),
                export_to=out_dir,
                export_formats=tuple(Format),
            )
    result, analytics, files = done.sync, done.analytics, done.exported
    assert result is not None
    if result.failed:
        raise SyncError(failure_message(result.namespaces))
    folder = done.export_folder
    assert analytics is not None and folder is not None
    report = report_step(owner, folder / "report.html")
    models = analytics.models
    if done.failure:
        raise SyncError(done.failure)
    with owner.session(read_only=True, memory_limit=None) as con:
        row = con.execute(SUMMARY_SQL).fetchall()[0]
    assert row is not None
    (namespaces, counterparties, connections, questionnaires, answers, expired, expiring,
     own_documents, own_expired, own_expiring, issues) = row
    seconds = result.seconds + models.seconds
    return "\n".join(
        [
            "",
            f"Synced {namespaces} namespaces in {seconds:.1f}s ({result.requests} requests):",
            f"  counterparties       {counterparties}  ({connections} connections)",
            f"  questionnaires       {questionnaires}",
            f"  answered fields      {answers}",
            f"  documents expired    {expired}",
            f"  documents expiring   {expiring}  (within {models.expiring_within_days} days)",
            f"  own companies        {own_documents} documents: {own_expired} expired, {own_expiring} expiring",
            f"  sync issues          {issues}  (denied or missing items, see analytics.sync_issues)",
            "",
            f"Warehouse: {warehouse}  (raw and analytics)",
            f"Analysts:  {analytics.published}  (read-only copy of analytics; try: {duckdb_cli()} "
            f"-readonly {analytics.published} \"from analytics.document_expiry where expiry_status = 'expiring' "
            "and not is_own_company\")",
            f"Reports:   {folder}/ ({len(files)} files: "
            + ", ".join(sorted({f.path.name for f in files}))
            + ")",
            f"Report:    {report.path}  (open it in a browser; it needs no network)",
            *([f"Evidence:  {owner.evidence_root}  (every response, sealed; head {result.evidence_head[:16]}; "
               f"try: {installed_command('diligence')} verify -w {warehouse})"] if result.evidence_head else []),
        ]
    )
