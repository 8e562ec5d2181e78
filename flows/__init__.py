"""The Prefect flows of diligence-warehouse, and the Prefect settings of our processes.

Prefect reads its settings once, when it is first imported. Every process that runs our
flows imports this package before Prefect (``python -m flows.…``, ``diligence
schedule``), so :func:`use_prefect_defaults` puts :data:`PREFECT_DEFAULTS` into the
environment first; the processes Prefect starts from there (a temporary API server,
served flow runs) inherit them. A value already set in the environment wins.

Then, in each such process, a signal that stops a run is never lost in a finalizer
(:func:`flows.signals.deliver_lost_signals`).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

__all__ = ["PREFECT_DEFAULTS", "use_prefect_defaults"]

#: Prefect settings of the processes that run our flows, unless their environment sets them.
PREFECT_DEFAULTS: dict[str, str] = {
    # No anonymous usage data to Prefect, as dlt's and dbt's are off (docs/reliability.md):
    # without a configured API, the temporary server Prefect starts would post a heartbeat
    # to sens-o-matic.prefect.io, and offline log "Failed to send telemetry" as an ERROR in
    # the run's output; Prefect's client events follow the same setting.
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
}


def use_prefect_defaults(env: MutableMapping[str, str] | None = None) -> None:
    """Set each of :data:`PREFECT_DEFAULTS` in `env` (default: this process's
    environment) that is not set there already."""
    env = os.environ if env is None else env
    for name, value in PREFECT_DEFAULTS.items():
        env.setdefault(name, value)


use_prefect_defaults()

from .signals import deliver_lost_signals  # noqa: E402 - imports Prefect, after its defaults

deliver_lost_signals()
