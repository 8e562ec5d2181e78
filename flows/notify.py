"""The run's notification: what is new since the previous run, through a Prefect block.

After the models are built, :func:`notify_changes` asks :mod:`diligence.analytics.alerts` for the
documents that newly expired or entered the expiring window and the namespaces that
failed, and sends them through the Prefect notification block named in config::

    [notifications]
    block = "custom-webhook/diligence-alerts"   # <block type slug>/<block name>

(env ``NOTIFICATIONS__BLOCK``). Any block of ``prefect.blocks.notifications`` works:
a custom webhook, Slack, Microsoft Teams, e-mail (SendGrid), ... Nothing is sent when
nothing is new, or when no block is configured. The text ends with the evidence
chain's head, a copy kept outside the warehouse (``diligence verify --head``). It is
masked like every artifact: no password, token or Basic/Bearer value can reach the payload.
"""

from __future__ import annotations

from datetime import datetime, timezone

from prefect import get_client, get_run_logger, task
from prefect.blocks.core import Block
from prefect.blocks.notifications import NotificationBlock
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

from diligence.analytics.alerts import RunAlerts, run_alerts
from diligence.config import notification_block
from diligence.evidence.chain import evidence_summary
from diligence.sync import NamespaceOutcome
from diligence.warehouse import open_warehouse

from .service import mask

__all__ = ["load_notification_block", "notify_changes"]


def load_notification_block(name: str) -> NotificationBlock:
    """The saved notification block `name` (``<block type slug>/<block name>``)."""
    if "/" not in name:
        raise ValueError(
            f"notifications.block {name!r} must be '<block type slug>/<block name>', "
            "e.g. 'custom-webhook/diligence-alerts' or 'slack-webhook/compliance'"
        )
    block = Block.load(name)
    if not isinstance(block, NotificationBlock):
        raise ValueError(f"block {name!r} is a {type(block).__name__}, not a notification block")
    return block


def _flow_run_started_at() -> datetime:
    """When the current flow run started, from the Prefect API."""
    with get_client(sync_client=True) as client:
        run = client.read_flow_run(flow_run.get_id())
    started = run.start_time or run.expected_start_time
    return datetime.fromtimestamp(started.timestamp(), tz=timezone.utc)


@task(name="notify-changes", retries=2, retry_delay_seconds=[10, 60], cache_policy=NO_CACHE)
def notify_changes(
    warehouse: str | None,
    outcomes: list[NamespaceOutcome],
    expiring_within_days: int,
    run_started_at: datetime | None = None,
    block: str | None = None,
) -> RunAlerts | None:
    """Send what is new since the previous run through the configured block.

    Returns what was sent, or None when nothing was (nothing new, or no block set).
    """
    logger = get_run_logger()
    name = notification_block(block)
    if name is None:
        logger.info("no notification block configured ([notifications] block): nothing sent")
        return None
    with open_warehouse(warehouse).session(read_only=True, memory_limit=None) as con:
        alerts = run_alerts(
            con,
            run_started_at=run_started_at or _flow_run_started_at(),
            expiring_within_days=expiring_within_days,
            failed_namespaces=[
                (o.namespace_company_id, mask(o.error or "failed"))
                for o in outcomes
                if o.status != "success"
            ],
        )
    if alerts.empty:
        logger.info("nothing new since the previous run: no notification sent")
        return None
    evidence = evidence_summary(open_warehouse(warehouse))
    body = alerts.body() + (f"\n\nEvidence chain head: {evidence['head']}\n" if evidence and evidence["head"] else "")
    load_notification_block(name).notify(body=mask(body), subject=mask(alerts.subject()))
    logger.info("notification sent through %s: %s", name, alerts.subject())
    return alerts
