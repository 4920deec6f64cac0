"""A server bound to an inventory target (``target:``) whose tool has its own ``target`` argument.

The fleet routes each call of a bound server's tools by a ``target`` argument it adds, so such a
tool is a schema we cannot pass on: refused at start-up like every other one (a warning naming the
server, the tool and the clash; ``chatops doctor`` counts it as skipped), never a crash of every
run. The server's other tools are offered, and on a server that is not bound (its tools are never
routed by target) the tool keeps its ``target``. Real servers: the hostile stdio server of
tests/support/mcp_servers.py, once bound to ``db-01`` and once not.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import pytest
import redis
import yaml

from agent.tooling import Tool
from bot.keys import Keys
from bot.ops.doctor import Outcome
from bot.ops.doctor_mcp import check_mcp
from bot.ops.fleet import build_fleet
from bot.ops.tools_cli import tool_rows
from bot.settings import Settings
from tests.tools.mcp.conftest import ROOT
from tools.config import ToolsConfig
from tools.mcp import McpPool
from tools.registry import ToolRegistry, build_registry
from tools.targets import TargetedTool

HOSTILE = [sys.executable, "-m", "tests.support.mcp_servers", "hostile"]
APPROVED = {"confirmed_by": "U_APPROVER"}
CLASH = "the argument 'target' clashes with the inventory's target"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    catalog = tmp_path / "tools.yaml"
    servers = {
        "cluster": {"command": HOSTILE, "cwd": str(ROOT), "target": "db-01"},
        "hostile": {"command": HOSTILE, "cwd": str(ROOT)},
    }
    catalog.write_text(yaml.safe_dump({"mcp_servers": servers}))
    inventory = tmp_path / "inventory.yaml"
    targets = [{"name": "db-01", "via": "local"}, {"name": "web-03", "via": "runner"}]
    inventory.write_text(yaml.safe_dump({"targets": targets}))
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        chatops_tools_file=catalog,
        chatops_inventory_file=inventory,
        chatops_runner_secret="s" * 32,
    )


def registry_of(settings: Settings, pool: McpPool) -> ToolRegistry:
    return build_registry(ToolsConfig.from_settings(settings), mcp_pool=pool)


def run_tools(settings: Settings, registry: ToolRegistry, client: redis.Redis, keys: Keys) -> dict[str, Tool]:
    """What every run in a channel is offered (``run_job`` calls ``Fleet.tools_for``)."""
    fleet = build_fleet(settings, client, keys, registry)
    return {tool.definition.name: tool for tool in fleet.tools_for("C1")}


def test_a_bound_servers_tool_with_its_own_target_is_refused_at_start_up(
    settings: Settings, pool: McpPool, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="tools.mcp.toolset"):
        registry = registry_of(settings, pool)
    status = {status.server: status for status in registry.mcp.statuses}["cluster"]
    assert status.error is None
    assert "cluster_scale" not in status.offered and "cluster_hello" in status.offered
    reasons = dict(line.split(": ", 1) for line in status.skipped)
    assert reasons["scale"].startswith(CLASH) and "'db-01'" in reasons["scale"]
    assert "bad_schema" in reasons  # refused the same way as a schema that is not JSON Schema
    warnings = [record.getMessage() for record in caplog.records]
    assert any(
        line.startswith(f"MCP server cluster: tool 'scale' is not offered: {CLASH}") for line in warnings
    )
    offered = {tool.definition.name for tool in registry.mcp.by_target["db-01"]}
    assert "cluster_scale" not in offered and "cluster_hello" in offered


def test_doctor_warns_of_each_refused_tool_and_why(settings: Settings) -> None:
    check = check_mcp(settings)  # starts the servers in this process's own pool
    assert check.outcome is Outcome.WARN and "deny" in check.fix
    lines = {line.split(" ", 1)[0]: line for line in check.summary.splitlines()}
    assert lines["cluster"].endswith("12 tools listed, 10 offered, 2 skipped")  # scale and bad_schema
    assert lines["hostile"].endswith("12 tools listed, 11 offered, 1 skipped")  # bad_schema only
    reasons = [line.strip() for line in check.summary.splitlines() if line.startswith("  not offered: ")]
    assert any(reason.startswith(f"not offered: scale: {CLASH}") for reason in reasons)
    assert sum(r.startswith("not offered: bad_schema: ") for r in reasons) == 2


def test_runs_are_offered_the_bound_servers_other_tools_on_its_target(
    settings: Settings, pool: McpPool, redis_client: redis.Redis, keys: Keys
) -> None:
    tools = run_tools(settings, registry_of(settings, pool), redis_client, keys)
    assert "cluster_scale" not in tools
    hello = tools["cluster_hello"]
    assert isinstance(hello, TargetedTool) and hello.target_names == ["db-01"]
    assert hello.definition.parameters["properties"]["target"]["enum"] == ["db-01"]
    result = hello.execute(json.dumps({"target": "db-01", "name": "ops", **APPROVED}), timeout=10)
    assert not result.is_error and "hello ops from pid" in result.output and result.target == "db-01"


def test_an_unbound_servers_tool_keeps_its_own_target(
    settings: Settings, pool: McpPool, redis_client: redis.Redis, keys: Keys
) -> None:
    tools = run_tools(settings, registry_of(settings, pool), redis_client, keys)
    scale = tools["hostile_scale"]
    assert not isinstance(scale, TargetedTool)  # never routed by target: the server's argument
    assert set(scale.definition.parameters["properties"]) == {"target", "replicas"}
    result = scale.execute(json.dumps({"target": "web", "replicas": 3, **APPROVED}), timeout=10)
    assert not result.is_error and "scaled web to 3" in result.output
    rows = {row.name: row for row in tool_rows(settings)}
    assert (
        rows["hostile_scale"].origin.startswith("MCP server hostile") and rows["hostile_scale"].target == ""
    )
    assert "cluster_scale" not in rows
    # The bound server's tools are listed too, each saying the one target it is offered for.
    hello = rows["cluster_hello"]
    assert hello.target == "db-01" and hello.origin.startswith("MCP server cluster (")
    assert hello.origin.endswith(", only on target db-01"), hello.origin
