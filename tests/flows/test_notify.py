"""The run's notification, through a real Prefect block to a webhook receiver on
127.0.0.1: the digest of the configured kinds, nothing sent on a first sync or when
nothing changed, no secret."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import duckdb
import pytest
from prefect.blocks.notifications import CustomWebhookNotificationBlock

from flows.company_connections_sync import company_connections_sync
from sandbox import edits
from sandbox.server import DEFAULT_EMAIL, DEFAULT_PASSWORD, SandboxServer
from tests.processes import Receiver

pytestmark = pytest.mark.slow

BLOCK = "custom-webhook/diligence-alerts"
JWT_PREFIX = base64.urlsafe_b64encode(b'{"alg":"HS256","typ":"JWT"}').rstrip(b"=").decode()


@pytest.fixture
def receiver(prefect_harness: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Receiver]:
    """The receiver, and a Custom Webhook block pointing at it, named in config (env)."""
    with Receiver() as server:
        CustomWebhookNotificationBlock(
            name="diligence",
            url=server.url,
            json_data={"subject": "{{subject}}", "text": "{{body}}"},
        ).save(BLOCK.split("/")[1], overwrite=True)
        monkeypatch.setenv("NOTIFICATIONS__BLOCK", BLOCK)
        yield server


def _lines(text: str, kind: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"- {kind.replace('_', ' ')}: ")]


@pytest.mark.usefixtures("quick_retries")
def test_notification_lists_what_is_new_and_nothing_when_unchanged(
    receiver: Receiver,
    credentials: dict[str, str],
    paths: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with SandboxServer(scale="small") as sandbox:

        def run() -> Any:
            return company_connections_sync(
                export_formats=["csv"], base_url=sandbox.base_url, **paths, return_state=True
            )

        # 1. the first run has nothing to compare with, 2. nothing changed: nothing is sent
        assert run().is_completed()
        assert run().is_completed()
        assert receiver.payloads == []

        # 3. one document expires, another enters the window, a namespace fails
        own, broken = sandbox.world.namespaces[:2]
        with duckdb.connect(paths["warehouse"], read_only=True) as con:
            valid = con.execute(
                "select document_id, company_name, document_name from analytics.document_expiry "
                "where expiry_status = 'valid' and namespace_company_id = ? "
                "order by document_id limit 2",
                [own],
            ).fetchall()
        (gone, gone_company, gone_name), (soon, soon_company, soon_name) = valid
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        edits.update_document(
            sandbox.world, gone, set_fields={"expirationDate": (now - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S")}
        )
        edits.update_document(
            sandbox.world, soon, set_fields={"expirationDate": (now + timedelta(days=5)).strftime("%Y-%m-%dT%H:%M:%S")}
        )
        sandbox.faults.fail_namespaces = [broken]
        # only these kinds: the two documents' changed dates are not sent
        monkeypatch.setenv("NOTIFICATIONS__KINDS", "document_newly_expired,document_newly_expiring,namespace_failed")
        assert run().is_failed()  # the failed namespace fails the run, after the notification
        sandbox.faults.fail_namespaces = []

    [payload] = receiver.payloads
    text = payload["text"]
    assert payload["subject"] == "diligence: 1 document newly expiring, 1 document newly expired, 1 namespaces failed"
    assert "2 changes since the previous sync" in text
    [expired] = _lines(text, "document_newly_expired")
    assert expired.startswith(f"- document newly expired: {gone_name} [") and expired.endswith(
        f": valid -> expired since {(now - timedelta(days=1)).date().isoformat()}")
    [expiring] = _lines(text, "document_newly_expiring")
    assert expiring.startswith(f"- document newly expiring: {soon_name} [")
    assert f"{gone_company} (" in text and f"{soon_company} (" in text  # grouped by counterparty
    assert not _lines(text, "document_changed")
    assert "Failed namespaces, previous data kept (1):" in text and f"- {broken}: " in text
    head = (Path(paths["warehouse"]).with_name("warehouse.evidence") / "syncs" / "HEAD").read_text().split()[0]
    assert text.rstrip().endswith(f"Evidence chain head: {head}")  # a copy kept elsewhere
    blob = json.dumps(payload)
    assert DEFAULT_PASSWORD not in blob and JWT_PREFIX not in blob
    assert base64.b64encode(f"{DEFAULT_EMAIL}:{DEFAULT_PASSWORD}".encode()).decode() not in blob
