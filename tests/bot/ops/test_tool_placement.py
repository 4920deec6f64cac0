"""Where a tool runs is the tool's own declaration: the worker's runtime refuses a tool that makes
none, and routes every other one by what it declares (``tools.placement``, ``bot.fleet.routing``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis
import yaml
from pydantic import BaseModel, ConfigDict

from agent.tooling import Tool
from bot.ops.worker import default_runtime, load_runtime_factory
from bot.runs.runtime import Runtime
from bot.settings import Settings
from tools.base import FunctionTool, ToolContext
from tools.errors import ToolConfigError
from tools.placement import HOST, WORKER, Placement

RAN: list[str] = []  # what the tools below ran: nothing, in every test here


class QueueArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    queue: str = "mail"


def queue_tool(name: str, placement: Placement | None) -> FunctionTool[Any]:
    """A deployment's own Python tool that reads the host it runs on (a local spool directory)."""

    def run(args: QueueArgs, ctx: ToolContext) -> str:
        RAN.append(name)
        return f"{args.queue}: 0 waiting"

    return FunctionTool(
        run, QueueArgs, name=name, description="Messages waiting in a local spool.", placement=placement
    )


def undeclared_runtime(settings: Settings) -> Runtime:
    """``CHATOPS_RUNTIME=tests.bot.ops.test_tool_placement:undeclared_runtime``: the production runtime
    with a host tool whose author left out where it runs."""
    return default_runtime(settings, extra_tools=[queue_tool("spool_depth", None)])


def settings_for(redis_url: str, key_prefix: str, tmp_path: Path, **more: Any) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        redis_url=redis_url,
        chatops_redis_prefix=key_prefix,
        chatops_runtime="tests.bot.ops.test_tool_placement:undeclared_runtime",
        chatops_log_dirs=[str(tmp_path)],
        **more,
    )


def test_a_host_tool_without_a_placement_stops_the_worker_runtime(
    redis_url: str, key_prefix: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    settings = settings_for(redis_url, key_prefix, tmp_path)
    build = load_runtime_factory(settings.chatops_runtime)  # as the worker loads CHATOPS_RUNTIME
    with pytest.raises(ToolConfigError, match=r"^tool spool_depth declares no placement: say where it runs"):
        build(settings)
    assert RAN == []


def test_the_fleet_routes_each_tool_by_what_it_declares(
    redis_url: str, key_prefix: str, redis_client: redis.Redis, tmp_path: Path
) -> None:
    inventory = tmp_path / "inventory.yaml"
    targets = [{"name": "ops-box", "via": "local"}, {"name": "web-03", "via": "runner"}]
    inventory.write_text(yaml.safe_dump({"targets": targets}))
    settings = settings_for(
        redis_url, key_prefix, tmp_path, chatops_inventory_file=inventory, chatops_runner_secret="s" * 32
    )
    extra: list[Tool] = [queue_tool("spool_depth", HOST), queue_tool("spool_api", WORKER)]
    runtime = default_runtime(settings, extra_tools=extra)
    try:
        assert runtime.channel_tools is not None
        tools = {tool.definition.name: tool for tool in runtime.channel_tools("C1")}
    finally:
        runtime.close()
    host = tools["spool_depth"].definition.parameters
    assert host["properties"]["target"]["enum"] == ["ops-box", "web-03"] and host["required"] == ["target"]
    assert "target" not in tools["spool_api"].definition.parameters["properties"]  # runs in the worker
    assert "target" in tools["disk_usage"].definition.parameters["properties"]  # the built-ins alike
    assert "target" not in tools["http_check"].definition.parameters["properties"]
    assert RAN == []
