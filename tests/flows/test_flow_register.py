"""The `company-connections-register` flow: the register as of a date into
`<reports_dir>/register-<as_of>/`, the same files as `diligence export --as-of` with the
register.json that `diligence verify` proves, an artifact naming the sync it stands on; without `as_of`, the last quarter's end; a date
before the first sync fails the run at once (not retried) and writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest

from flows.register import REGISTER_ARTIFACT_KEY, company_connections_register, last_quarter_end
from tests.cli.helpers import run
from tests.flows.conftest import RunReader, SharedRun
from tests.helpers import copy_warehouse


@pytest.mark.parametrize(("now", "end"), [
    (datetime(2026, 11, 29, 14, 0, tzinfo=UTC), datetime(2026, 9, 30, 23, 59, 59, 999999, tzinfo=UTC)),
    (datetime(2027, 1, 1, 7, 0, tzinfo=UTC), datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
    (datetime(2026, 4, 1, 0, 30, tzinfo=UTC), datetime(2026, 3, 31, 23, 59, 59, 999999, tzinfo=UTC)),
])
def test_the_default_is_the_end_of_the_last_quarter(now: datetime, end: datetime) -> None:
    assert last_quarter_end(now) == end


def test_the_flow_writes_the_register_the_cli_exports(default_run: SharedRun, runs: RunReader,
                                                      tmp_path: Path) -> None:
    warehouse = copy_warehouse(Path(default_run.paths["warehouse"]), tmp_path / "w.duckdb")
    with duckdb.connect(str(warehouse), read_only=True) as con:
        (synced_at,) = con.execute("select max(synced_at) from raw.sync_runs").fetchone()  # type: ignore[misc]
    as_of = synced_at + timedelta(minutes=1)
    state = company_connections_register(as_of=as_of, export_formats=["csv"], warehouse=str(warehouse),
                                         reports_dir=str(tmp_path / "reports"), return_state=True)
    assert state.is_completed(), state.message
    written = state.result()
    folder = tmp_path / "reports" / f"register-{as_of.astimezone(UTC):%Y-%m-%dT%H%M%SZ}"
    assert written.folder == folder and written.synced_at == synced_at
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        ["answers.csv", "answers_wide.csv", "connections.csv", "document_expiry.csv",
         "questionnaire_completeness.csv", "register.json", "report.html"])
    cli = run(["export", "-w", str(warehouse), "--as-of", as_of.isoformat(), "--out", "cli"], tmp_path)
    assert cli.returncode == 0, cli.stderr
    assert f"the warehouse as the sync of {synced_at.astimezone(UTC).isoformat()} left it" in cli.stdout
    for name in ("answers.csv", "document_expiry.csv", "connections.csv"):
        assert (folder / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
    verified = run(["verify", str(folder), "-w", str(warehouse)], tmp_path)  # its proof holds
    assert verified.returncode == 0, verified.stderr
    found = runs.artifacts(state.state_details.flow_run_id)
    (artifact,) = [a for a in found if a.key == REGISTER_ARTIFACT_KEY]
    assert f"the sync of {synced_at.astimezone(UTC).isoformat()}" in str(artifact.data)

    early = company_connections_register(as_of=synced_at - timedelta(days=1), warehouse=str(warehouse),
                                         reports_dir=str(tmp_path / "early"), return_state=True)
    assert early.is_failed() and "before the warehouse's first sync" in early.message
    (task,) = [t for t in runs.task_runs(early.state_details.flow_run_id) if t.name.startswith("write-register")]
    assert task.run_count == 1  # a usage error is not retried
    assert not (tmp_path / "early").exists()
