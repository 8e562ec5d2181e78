"""Fast tests of the flow's logic: summaries, retry decisions, credentials, schedule
settings, and the tasks' functions called with `.fn()`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from prefect.logging import disable_run_logger
from prefect.states import Failed

import flows.service
from diligence.analytics.checks import CheckResult
from diligence.errors import DiligenceError
from diligence.report.export import ExportedFile
from diligence.report.folders import RUN_FOLDER, latest_run
from diligence.steps import check_export_formats, failure_message
from diligence.sync import NamespaceOutcome, SyncError, run_sync
from diligence.warehouse import Warehouse, WarehouseBusyError
from flows.company_connections_sync import (
    NamespacePlan,
    SyncAttempts,
    export_run_reports,
    rebuild_analytics_schema,
)
from flows.errors import NamespacesNotLoadedError, NamespaceSyncError, RunFailedError
from flows.report import expiring_documents_table, summary_markdown
from flows.retry import is_transient, retry_if_transient
from flows.serve import (
    DEFAULT_CRON,
    DEFAULT_TIMEZONE,
    deployment_parameters,
    route_library_logs,
    schedule_settings,
)
from flows.service import credential_options, mask
from pipelines.company_connections.errors import (
    AuthenticationError,
    ConfigurationError,
    RequestFailedError,
    UnknownNamespaceError,
)
from sandbox.server import SandboxServer
from tests.helpers import settings_for

from .conftest import SharedRun

OK = NamespaceOutcome("ns-ok", "success", 166, 215, 1, 0.42, versions_written=40)
BROKEN = NamespaceOutcome(
    "ns-broken", "failed", 12, 0, 0, 1.5, error="GET /api/x failed after 6 attempt(s) | HTTP 503"
)


@pytest.fixture(autouse=True)
def no_password_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests run without a Prefect API: no Secret block to look up."""
    monkeypatch.setattr(flows.service, "password_from_block", lambda: None)


def auth_error() -> AuthenticationError:
    return AuthenticationError("login rejected", method="POST", path="/api/auth", status_code=401)


def request_failed() -> RequestFailedError:
    return RequestFailedError(
        "", method="GET", path="/api/companies", attempts=6, last_error="HTTP 503"
    )


def raised_from(error: Exception, outer: Exception) -> Exception:
    """`outer` raised while handling `error`, `from None` (as run_sync does)."""
    outer.__context__ = error
    outer.__suppress_context__ = True
    return outer


# -- the markdown summary ---------------------------------------------------------------
def test_summary_lists_every_namespace_with_its_numbers() -> None:
    markdown = summary_markdown(
        [OK, BROKEN],
        row_counts={"analytics.answers": 1994},
        checks=[CheckResult("answers__unique_key", 0), CheckResult("answers__no_labels", 3)],
        exported=[ExportedFile("answers", Path("reports/2026-01-31/answers.csv"), 1994)],
    )

    assert ("1 of 2 namespaces loaded, 178 requests, 215 rows received, 40 row versions written, "
            "1 sync issue.") in markdown
    assert "| `ns-ok` | loaded | 166 | 215 | 40 | 1 | 0.4 s |" in markdown
    assert "| `ns-broken` | **failed** | 12 | 0 | 0 | 0 | 1.5 s |" in markdown
    assert "- `ns-broken`: GET /api/x failed after 6 attempt(s) \\| HTTP 503" in markdown
    assert "| `analytics.answers` | 1,994 |" in markdown
    assert "1 of 2 checks failed:" in markdown and "- `answers__no_labels`: 3 rows" in markdown
    assert "in `reports/2026-01-31/`:" in markdown and "- `answers.csv` (1,994 rows)" in markdown
    assert "Analysts' copy: not replaced" in markdown


def test_summary_of_a_clean_run() -> None:
    markdown = summary_markdown(
        [OK],
        row_counts={},
        checks=[CheckResult("a", 0)],
        exported=[],
        published=Path("data/warehouse-analytics.duckdb"),
    )
    assert "1 of 1 namespace loaded" in markdown
    assert "all 1 check passed" in markdown
    assert "Not loaded" not in markdown
    assert "Analysts' copy: `data/warehouse-analytics.duckdb`" in markdown


def test_summary_of_a_sync_that_loaded_nothing() -> None:
    markdown = summary_markdown([BROKEN], row_counts=None, evidence={"head": "ab12", "syncs": 1,
                                                                     "responses": 3, "path": "e"})
    assert "0 of 1 namespace loaded" in markdown and "- `ns-broken`: GET /api/x" in markdown
    assert "Nothing built, checked, exported or published: the sync loaded no namespace" in markdown
    assert "## data checks" not in markdown and "## reports" not in markdown
    assert "head `ab12`" in markdown


# -- the run's verdict ---------------------------------------------------------------------
def test_failure_message_names_namespaces_and_checks() -> None:
    assert failure_message([OK], [CheckResult("a", 0)]) == ""
    message = failure_message([OK, BROKEN], [CheckResult("answers__no_labels", 3)])
    assert message.startswith("1 of 2 namespaces not loaded (previous data kept): ns-broken (")
    assert "1 data check failed: answers__no_labels (3 rows)" in message
    assert "ns-ok" not in message
    nothing = failure_message([BROKEN])
    assert nothing.startswith("nothing loaded, nothing built or published: 1 of 1 namespace not loaded")
    assert failure_message([]) == ""  # nothing to sync: nothing failed


# -- the sync's attempts: Prefect retries the task, which reads what is pending ---------------
def test_a_retry_reads_only_the_namespaces_another_attempt_may_load() -> None:
    lost = NamespaceOutcome("ns-lost", "failed", 1, 0, 0, 0.1, error="not listed", retryable=False)
    attempts = SyncAttempts(NamespacePlan(namespaces=["ns-ok", "ns-broken", "ns-lost", "ns-kept"],
                                          available=["ns-ok", "ns-broken", "ns-kept"]))
    assert attempts.pending() == ["ns-ok", "ns-broken", "ns-lost", "ns-kept"]
    attempts.outcomes.update({"ns-ok": OK, "ns-broken": BROKEN, "ns-lost": lost})
    attempts.synced.update(attempts.pending())  # ns-kept: committed by an interrupted sync
    assert attempts.pending() == ["ns-broken"]
    assert attempts.final(Failed(data=NamespacesNotLoadedError([BROKEN]))) == [OK, BROKEN, lost]


def test_a_sync_that_could_not_run_fails_every_namespace_not_read() -> None:
    attempts = SyncAttempts(NamespacePlan(namespaces=["ns-ok", "ns-x"], available=["ns-ok", "ns-x"]))
    attempts.outcomes["ns-ok"] = OK  # committed before the sync failed
    assert attempts.pending() == ["ns-x"]
    (ok, x) = attempts.final(Failed(data=SyncError("login rejected")))
    assert ok == OK
    assert (x.namespace_company_id, x.status, x.requests, x.error) == ("ns-x", "failed", 0, "login rejected")


def test_namespaces_not_loaded_are_named_and_retried() -> None:
    error = NamespacesNotLoadedError([BROKEN])
    assert str(error).startswith("1 namespace not loaded, to be read again (previous data kept): ns-broken (")
    assert retry_if_transient(None, None, Failed(data=error))  # type: ignore[arg-type]


def test_export_formats_are_checked_before_the_run() -> None:
    check_export_formats(["csv", "parquet"])
    with pytest.raises(ValueError, match="xlsx"):
        check_export_formats(["csv", "xlsx"])


# -- retries -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (request_failed(), True),
        (NamespaceSyncError(BROKEN), True),
        (NamespacesNotLoadedError([BROKEN]), True),
        (WarehouseBusyError("another sync is writing"), True),
        (raised_from(request_failed(), SyncError("service unreachable")), True),
        (duckdb.IOException("Could not set lock on file"), True),
        (auth_error(), False),
        (raised_from(auth_error(), SyncError("login rejected")), False),
        (raised_from(ConfigurationError("no credentials"), SyncError("no credentials")), False),
        (UnknownNamespaceError(["nope"], ["ns-ok"]), False),
        (ValueError("unknown export format"), False),
        (ExceptionGroup("read", [auth_error(), request_failed()]), False),
        # the attribute decides for our own errors, whatever their class
        (SyncError("bad settings", transient=False), False),
        (DiligenceError("lock timed out", transient=True), True),
        (RunFailedError("1 of 2 namespaces not loaded"), False),
    ],
)
def test_only_transient_failures_are_retried(error: BaseException, transient: bool) -> None:
    assert is_transient(error) is transient
    assert retry_if_transient(None, None, Failed(data=error)) is transient  # type: ignore[arg-type]


# -- credentials -----------------------------------------------------------------------------
@pytest.fixture
def no_configured_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("PASSWORD", "ACCESS_TOKEN"):
        monkeypatch.delenv(f"SOURCES__COMPANY_CONNECTIONS__{key}", raising=False)


def test_configured_password_wins_over_the_block(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCES__COMPANY_CONNECTIONS__PASSWORD", "from-env")
    monkeypatch.setattr(flows.service, "password_from_block", lambda: pytest.fail("block read"))
    assert credential_options() == {}


@pytest.mark.usefixtures("no_configured_secrets")
def test_block_password_when_config_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flows.service, "password_from_block", lambda: "from-block")
    assert credential_options() == {"password": "from-block"}
    assert mask("error: from-block rejected") == "error: *** rejected"


@pytest.mark.usefixtures("no_configured_secrets")
def test_token_only_mode_needs_no_block(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCES__COMPANY_CONNECTIONS__ACCESS_TOKEN", "eyJx.eyJy.z")
    monkeypatch.setattr(flows.service, "password_from_block", lambda: pytest.fail("block read"))
    assert credential_options() == {}


# -- serving -------------------------------------------------------------------------------
def test_schedule_from_arguments_config_or_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCHEDULE__CRON", raising=False)
    monkeypatch.delenv("SCHEDULE__TIMEZONE", raising=False)
    assert schedule_settings() == (DEFAULT_CRON, DEFAULT_TIMEZONE)
    monkeypatch.setenv("SCHEDULE__CRON", "30 5 * * 1-5")
    monkeypatch.setenv("SCHEDULE__TIMEZONE", "Europe/Zurich")
    assert schedule_settings() == ("30 5 * * 1-5", "Europe/Zurich")
    assert schedule_settings("0 7 * * *", "UTC") == ("0 7 * * *", "UTC")


def test_library_logs_are_added_to_prefect_extra_loggers() -> None:
    env = {"PREFECT_LOGGING_EXTRA_LOGGERS": "httpx, dlt"}
    route_library_logs(env)
    assert env["PREFECT_LOGGING_EXTRA_LOGGERS"] == "httpx,dlt,diligence"
    empty: dict[str, str] = {}
    route_library_logs(empty)
    assert empty["PREFECT_LOGGING_EXTRA_LOGGERS"] == "dlt,diligence"


def test_deployment_parameters_keep_only_what_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    # settings stay out of the deployment: each run resolves them where it runs
    monkeypatch.setenv("SOURCES__COMPANY_CONNECTIONS__EXPIRING_WITHIN_DAYS", "45")
    monkeypatch.setenv("DILIGENCE_WAREHOUSE", "/srv/configured.duckdb")
    assert deployment_parameters() == {}
    assert deployment_parameters(warehouse="/srv/w.duckdb") == {"warehouse": "/srv/w.duckdb"}
    assert (
        deployment_parameters(expiring_within_days=10, namespaces=[])["expiring_within_days"] == 10
    )



def test_the_flow_reads_settings_through_diligence_config(monkeypatch: pytest.MonkeyPatch) -> None:
    import ast

    import diligence.config
    from flows.service import configured_namespaces

    monkeypatch.setenv("SOURCES__COMPANY_CONNECTIONS__NAMESPACES", '["ns-a", "ns-b"]')
    monkeypatch.setenv("SOURCES__COMPANY_CONNECTIONS__EXPIRING_WITHIN_DAYS", "12")
    assert configured_namespaces() == diligence.config.configured_namespaces() == ["ns-a", "ns-b"]
    assert diligence.config.expiring_within_days() == 12
    monkeypatch.delenv("SOURCES__COMPANY_CONNECTIONS__NAMESPACES")
    monkeypatch.delenv("SOURCES__COMPANY_CONNECTIONS__EXPIRING_WITHIN_DAYS")
    assert configured_namespaces() == []  # .dlt/config.toml lists none
    assert deployment_parameters(expiring_within_days=5)["expiring_within_days"] == 5
    # one reader of the settings: no flow module looks dlt config up itself
    for module in Path(__file__).resolve().parents[2].joinpath("flows").glob("*.py"):
        tree = ast.parse(module.read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert "dlt" not in imported, module.name

# -- the tasks' functions on a real warehouse --------------------------------------------------
@pytest.fixture(scope="module")
def synced_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    warehouse = tmp_path_factory.mktemp("warehouse") / "warehouse.duckdb"
    with SandboxServer(scale="small") as sandbox:
        run_sync(warehouse, settings_for(sandbox, namespaces=[sandbox.world.namespaces[0]]))
    yield warehouse


def test_task_functions_build_check_and_export(synced_warehouse: Path, tmp_path: Path) -> None:
    with disable_run_logger():
        analytics = rebuild_analytics_schema.fn(str(synced_warehouse), 30)
        exported = export_run_reports.fn(str(synced_warehouse), str(tmp_path), ["parquet", "parquet"])
        again = export_run_reports.fn(str(synced_warehouse), str(tmp_path), ["parquet"])

    assert analytics.models.row_counts["analytics.answers"] > 0
    assert analytics.checks and not analytics.failed_checks
    assert analytics.published == synced_warehouse.with_name("warehouse-analytics.duckdb")
    # each run its own folder, named after the last sync; `latest` names the second
    with duckdb.connect(str(synced_warehouse), read_only=True) as con:
        (sync_id,) = con.execute("select max(sync_id) from analytics.sync_runs").fetchone()  # type: ignore[misc]
    for run in (exported, again):
        match = RUN_FOLDER.fullmatch(run.folder.name)
        assert run.folder.parent == tmp_path and match is not None and match["sync"] == sync_id
        assert {f.path.parent for f in run.files} == {run.folder}
    assert exported.folder != again.folder and latest_run(tmp_path) == again.folder
    assert sorted(f.path.name for f in exported.files) == sorted(
        f"{report}.parquet"
        for report in (
            "answers",
            "document_expiry",
            "questionnaire_completeness",
            "connections",
            "answers_wide",
        )
    )


def test_expiring_documents_table(default_run: SharedRun) -> None:
    warehouse = Path(default_run.paths["warehouse"])
    rows, total = expiring_documents_table(Warehouse(warehouse), limit=5)
    assert total > 5 and len(rows) == 5
    assert {row["expiry_status"] for row in rows} == {"expired"}  # most urgent first
    assert isinstance(rows[0]["expiration_date"], str)
