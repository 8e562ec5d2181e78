"""prefect.yaml carries no defaults of its own: its schedules are config's defaults (the
quarter-end register's, its flow module's), and each parameter it sets is the flow's own
default (null where config decides, when the run starts)."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest
import yaml

from diligence.config import DEFAULT_CRON, DEFAULT_TIMEZONE
from flows.register import QUARTER_END_CRON

PREFECT_YAML = Path(__file__).resolve().parents[2] / "prefect.yaml"
DEPLOYMENTS: list[dict[str, Any]] = yaml.safe_load(PREFECT_YAML.read_text(encoding="utf-8"))["deployments"]


def _flow_defaults(entrypoint: str) -> dict[str, Any]:
    """The parameters of the flow at `entrypoint` (``path/to/module.py:flow``) with their
    defaults (``inspect.Parameter.empty`` when it has none)."""
    path, _, name = entrypoint.partition(":")
    flow = getattr(importlib.import_module(path.removesuffix(".py").replace("/", ".")), name)
    return {p.name: p.default for p in inspect.signature(flow.fn).parameters.values()}


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=[d["name"] for d in DEPLOYMENTS])
def test_schedules_are_configs_defaults(deployment: dict[str, Any]) -> None:
    register = deployment["entrypoint"].endswith(":company_connections_register")
    for schedule in deployment.get("schedules") or []:
        expected = (QUARTER_END_CRON, "UTC") if register else (DEFAULT_CRON, DEFAULT_TIMEZONE)
        assert (schedule["cron"], schedule["timezone"]) == expected


@pytest.mark.parametrize("deployment", DEPLOYMENTS, ids=[d["name"] for d in DEPLOYMENTS])
def test_parameters_are_the_flows_own_defaults(deployment: dict[str, Any]) -> None:
    defaults = _flow_defaults(deployment["entrypoint"])
    for name, value in (deployment.get("parameters") or {}).items():
        assert name in defaults, f"{deployment['name']}: the flow has no parameter {name}"
        assert value == defaults[name], (deployment["name"], name, value)
