"""`diligence status` shows upstream text with its escapes visible, never obeyed."""

from __future__ import annotations

import io

from rich.console import Console

from diligence.cli.status import render_status

HOSTILE = "\x1b]8;;http://evil.test\x1b\\click\x1b]8;;\x1b\\ [link=http://evil.test]x[/link]\x1b[2J"


def test_status_escapes_upstream_errors_and_names() -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=400, force_terminal=False, color_system=None)
    status = {
        "state": "missing",
        "sync_running": None,
        "failed_attempts": [{"at": "2026-01-01", "pid": 1, "error": HOSTILE}],
    }
    render_status("w.duckdb", console, status)
    shown = buffer.getvalue()
    assert "\x1b" not in shown
    assert "\\x1b]8;;http://evil.test" in shown
    assert "[link=http://evil.test]x[/link]" in shown


def _console() -> tuple[Console, io.StringIO]:
    buffer = io.StringIO()
    return Console(file=buffer, width=400, force_terminal=True, color_system=None), buffer


def test_check_lines_show_upstream_namespaces_escaped() -> None:
    from diligence.cli.check import CheckReport, NamespaceRights, report_lines

    report = CheckReport(base_url="http://127.0.0.1:1", auth="password login", available=[HOSTILE])
    report.namespaces = [NamespaceRights(namespace_company_id=HOSTILE, connections=1)]
    shown = "\n".join(report_lines(report))
    assert "\x1b" not in shown
    assert "\\x1b]8;;http://evil.test" in shown


def test_progress_bar_and_log_lines_escape_upstream_text(caplog) -> None:  # type: ignore[no-untyped-def]
    import logging

    from diligence.cli.progress import SyncProgress

    console, buffer = _console()
    with SyncProgress(console=console, interval=0.0) as progress:
        progress.live = False
        progress._progress = None  # the log-line rendering, as under cron or Prefect
        with caplog.at_level(logging.INFO, logger="diligence"):
            progress.planned(HOSTILE, 2)
            progress.waiting(HOSTILE, "\x1b[2Jretry-after")
            progress.done(HOSTILE, 1, 3)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "\x1b" not in logged and "\\x1b]8;;http://evil.test" in logged


def test_live_progress_bar_shows_markup_and_escapes_as_text() -> None:
    from diligence.cli.progress import SyncProgress

    console, buffer = _console()
    progress = SyncProgress(console=console, interval=0.0)
    progress.live = True
    with progress:
        progress.planned("\x1b[2J[b]n[/b]", 2)
        progress.waiting("\x1b[2J[b]n[/b]", "\x1b]0;t\x07[red]x[/red]")
        progress._progress.refresh()  # type: ignore[union-attr]
    shown = buffer.getvalue()
    assert "\\x1b[2J[b]n[/b]" in shown and "\\x1b]0;t\\x07[red]x[/red]" in shown
    assert "\x1b[2J" not in shown.replace("\x1b[2K", "") and "\x1b]0;t" not in shown


def test_log_lines_escape_control_characters(capsys) -> None:  # type: ignore[no-untyped-def]
    import logging

    from diligence.logs import configure_logging

    configure_logging()
    try:
        logging.getLogger("diligence.test").warning("upstream said %s", HOSTILE + "\nforged line")
    finally:
        logging.getLogger().handlers[:] = []
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b]8;;" in err
    assert "\\x0aforged line" in err and err.count("\n") == 1


def test_digest_lines_escape_upstream_names() -> None:
    from datetime import datetime, timezone

    from diligence.analytics.digest import Change, Digest

    change = Change("s", datetime(2026, 1, 1, tzinfo=timezone.utc), "ns", "c", HOSTILE, False, "t", None, "d",
                    "document_newly_expired", "\x1b[31mdoc", "valid", "expired", "valid", "\x1b[31mexpired", None)
    digest = Digest(changes=[change], failed_namespaces=[(HOSTILE, "\x1b[2J")])
    body = digest.body()
    assert "\x1b" not in body and "\x07" not in body
    assert "\\x1b[31mdoc" in body


def test_sync_summary_lines_escape_upstream_namespaces(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from types import SimpleNamespace

    from diligence.cli import output

    console, buffer = _console()
    monkeypatch.setattr(output, "out", console)
    outcome = SimpleNamespace(namespace_company_id=HOSTILE, status="success", requests=1, rows=2,
                              issues=0, duration_seconds=0.1, requests_kept=0, kept_since=None, versions_written=2)
    output.print_sync(SimpleNamespace(namespaces=[outcome], failed=[], resources=None,
                                      warehouse="w.duckdb", seconds=0.2))
    shown = buffer.getvalue()
    assert "\x1b]8;;http://evil.test" not in shown
    assert "[link=http://evil.test]x[/link]" in shown


def test_json_summary_carries_no_raw_control_character(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import json

    from diligence.cli.summary import write_summary

    path = write_summary({"namespaces": [{"namespace_company_id": HOSTILE, "error": HOSTILE}]},
                         tmp_path / "summary.json")
    text = path.read_text()
    assert "\x1b" not in text and json.loads(text)["namespaces"][0]["error"] == HOSTILE


def test_dlts_load_job_retries_show_only_when_verbose() -> None:
    """dlt logs each retry of a load job with its traceback; a user sees the step's one
    `error:` line instead, and the retries with --verbose or --debug."""
    import logging

    from diligence.logs import VERBOSE, configure_logging

    dlt_logger = logging.getLogger("dlt")
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    dlt_logger.addHandler(handler)
    try:
        for verbosity in (0, VERBOSE):
            configure_logging(verbosity=verbosity)
            dlt_logger.error("Transient exception in job companies.1.parquet in file x")
            dlt_logger.warning("Job for companies.1.parquet retried in load 1 with message Traceback")
            dlt_logger.warning("schema warning that stays")
    finally:
        dlt_logger.removeHandler(handler)
        configure_logging()
        logging.getLogger().handlers[:] = []
    assert seen == ["schema warning that stays",
                    "Transient exception in job companies.1.parquet in file x",
                    "Job for companies.1.parquet retried in load 1 with message Traceback",
                    "schema warning that stays"]
