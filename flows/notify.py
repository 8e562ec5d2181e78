"""The run's notification: the digest of what changed, through a Prefect block.

After the models are built (or once a sync loaded nothing), :func:`notify_changes` reads
this run's changes from ``analytics.changes`` (:func:`diligence.readouts.change_digest`: answers revised, documents
added, changed, newly expiring or expired, connections and reading rights, template
fields, keys the service started or stopped sending) and the namespaces it could not
load, and sends them through the Prefect notification block named in config::

    [notifications]
    block = "custom-webhook/diligence-alerts"   # <block type slug>/<block name>
    kinds = ["document_newly_expiring", "document_newly_expired", "answer_changed",
             "connection_removed", "namespace_failed"]   # default: every kind

(env ``NOTIFICATIONS__BLOCK``, ``NOTIFICATIONS__KINDS``). Any block of
``prefect.blocks.notifications`` works: a custom webhook, Slack, Microsoft Teams, e-mail
(SendGrid), ... Nothing is sent when nothing of those kinds changed, or when no block
is configured. The text ends with the evidence chain's head, a copy kept outside the
warehouse (``diligence verify --head``). It is masked like every artifact: no password,
token or Basic/Bearer value can reach the payload.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING

from prefect import get_client, get_run_logger, task
from prefect.blocks.core import Block
from prefect.blocks.notifications import NotificationBlock
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

from diligence.config import notification_block
from diligence.readouts import change_digest, evidence_of, notify_kinds
from diligence.steps import open_warehouse

from .service import mask

if TYPE_CHECKING:
    from diligence.readouts import Digest
    from diligence.steps import NamespaceOutcome

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
    run_started_at: datetime | None = None,
    block: str | None = None,
    kinds: list[str] | None = None,
) -> Digest | None:
    """Send this run's digest (changes detected since `run_started_at`, default the flow
    run's start, of the configured kinds) through the configured block.

    Returns what was sent, or None when nothing was (nothing changed, or no block set).
    """
    logger = get_run_logger()
    name = notification_block(block)
    if name is None:
        logger.info("no notification block configured ([notifications] block): nothing sent")
        return None
    wanted = notify_kinds(kinds)
    failed = [(o.namespace_company_id, mask(o.error or "failed")) for o in outcomes if o.status != "success"]
    owner = open_warehouse(warehouse)
    digest = change_digest(
        owner,
        since=run_started_at or _flow_run_started_at(),
        kinds=[kind for kind in wanted if kind != "namespace_failed"],
        failed_namespaces=failed if "namespace_failed" in wanted else (),
    )
    if digest.empty:
        logger.info("nothing changed since the previous run (of kinds %s): no notification sent",
                    ", ".join(wanted))
        return None
    evidence = evidence_of(owner)
    body = digest.body() + (f"\n\nEvidence chain head: {evidence['head']}\n" if evidence and evidence["head"] else "")
    load_notification_block(name).notify(body=mask(body), subject=mask(digest.subject()))
    logger.info("notification sent through %s: %s", name, digest.subject())
    return digest
