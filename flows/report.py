"""What a run publishes: the markdown summary and the expiring-documents table.

Pure functions over the results of the steps (and one read of the warehouse through
:mod:`diligence.readouts`), so they are tested without Prefect.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from diligence.readouts import expiring_documents
from diligence.safe_text import markdown_text, terminal_text
from diligence.words import counted

if TYPE_CHECKING:
    from diligence.steps import CheckResult, ExportedFile, NamespaceOutcome, Warehouse

#: The table artifact lists at most this many documents, most urgent first.
MAX_DOCUMENT_ROWS = 500


def _cell(text: object) -> str:
    """Upstream text safe inside markdown and a table cell: no link, image or HTML."""
    return markdown_text(text)


def _code(text: object) -> str:
    """Upstream text inside a code span: a backtick cannot close it early."""
    return terminal_text(text).replace("`", "'").replace("|", "\\|")


def summary_markdown(
    outcomes: Sequence[NamespaceOutcome],
    *,
    row_counts: dict[str, int] | None,
    checks: Sequence[CheckResult] = (),
    exported: Sequence[ExportedFile] = (),
    published: Path | None = None,
    report: Path | None = None,
    evidence: dict[str, Any] | None = None,
) -> str:
    """The run summary: per namespace requests, rows, sync issues, duration and status;
    then the analytics row counts (None: nothing was built, the sync loaded nothing), the
    data checks, the analysts' copy, the reports and the evidence chain's head (keep it:
    ``diligence verify --head`` checks a chain against it)."""
    loaded = [o for o in outcomes if o.status == "success"]
    failed = [o for o in outcomes if o.status != "success"]
    lines = [
        "# company-connections sync",
        "",
        (
            f"{len(loaded)} of {counted(len(outcomes), 'namespace')} loaded, "
            f"{counted(sum(o.requests for o in outcomes), 'request')}, "
            f"{counted(sum(o.rows for o in outcomes), 'row')} received, "
            f"{counted(sum(o.versions_written for o in outcomes), 'row version')} written, "
            f"{counted(sum(o.issues for o in outcomes), 'sync issue')}."
        ),
        "",
        "| namespace | status | requests | rows received | row versions written | sync issues | duration |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| `{_code(o.namespace_company_id)}` | {'loaded' if o.status == 'success' else '**failed**'}"
        f" | {o.requests} | {o.rows} | {o.versions_written} | {o.issues} | {o.duration_seconds:.1f} s |"
        for o in outcomes
    ]
    if failed:
        lines += ["", "**Not loaded** (their previous data is kept):", ""]
        lines += [f"- `{_code(o.namespace_company_id)}`: {_cell(o.error or 'failed')}" for o in failed]
    if any(o.issues for o in outcomes):
        lines += [
            "",
            "Sync issues are denied (403) or missing (404) items: see `analytics.sync_issues`.",
        ]

    if row_counts is None:
        lines += ["", "## analytics", "",
                  "Nothing built, checked, exported or published: the sync loaded no namespace, "
                  "so the warehouse and the analysts' copy are as they were."]
        return "\n".join(lines + _evidence_lines(evidence)) + "\n"

    lines += ["", "## analytics", "", "| table | rows |", "|---|---:|"]
    lines += [f"| `{table}` | {rows:,} |" for table, rows in row_counts.items()]

    failing = [c for c in checks if c.failing_rows]
    lines += ["", "## data checks", ""]
    if failing:
        lines.append(f"{len(failing)} of {counted(len(checks), 'check')} failed:")
        lines += ["", *(f"- `{c.name}`: {counted(c.failing_rows, 'row')}" for c in failing)]
    else:
        lines.append(f"all {counted(len(checks), 'check')} passed")
    lines += [
        "",
        f"Analysts' copy: `{published}`"
        if published
        else "Analysts' copy: not replaced (it keeps the last build that passed its checks)",
    ]

    lines += ["", "## reports", ""]
    folders = sorted({str(f.path.parent) for f in exported})
    if folders:
        lines.append("in " + ", ".join(f"`{folder}/`" for folder in folders) + ":")
        lines += ["", *(f"- `{f.path.name}` ({counted(f.rows, 'row')})" for f in exported)]
    else:
        lines.append("none written")
    if report is not None:
        uri = report.resolve().as_uri()
        lines += ["", f"HTML report (opens without network): [{report.name}]({uri}) `{report}`"]
    return "\n".join(lines + _evidence_lines(evidence)) + "\n"


def _evidence_lines(evidence: dict[str, Any] | None) -> list[str]:
    """The summary's evidence section: the chain's head (none when no evidence is kept)."""
    if evidence is None or not evidence.get("head"):
        return []
    return ["", "## evidence", "",
            f"head `{evidence['head']}` ({counted(evidence['syncs'], 'sealed sync')}, "
            f"{counted(evidence['responses'], 'response')} in `{_code(evidence['path'])}`); "
            "`diligence verify --head <this head>` proves the chain was not rewritten since"]


def _jsonable(value: Any) -> Any:
    """A table artifact cell: dates as ISO text, upstream text with controls escaped."""
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, str):
        return terminal_text(value)
    return value


def expiring_documents_table(
    warehouse: Warehouse, limit: int = MAX_DOCUMENT_ROWS
) -> tuple[list[dict[str, Any]], int]:
    """Documents expired or expiring, most urgent first, as table artifact rows (dates as
    ISO text, upstream text with controls escaped): (up to `limit` rows, total count)."""
    rows, total = expiring_documents(warehouse, limit)
    return [{column: _jsonable(value) for column, value in row.items()} for row in rows], total
