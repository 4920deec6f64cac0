"""The registry: sorted tools, duplicates refused, built from settings with the catalog on top."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from agent.tooling import Tool, ToolCategory
from bot.settings import Settings
from tools import ToolRegistry, build_output_filter, build_registry, build_registry_from_settings, tool
from tools.base import ToolContext
from tools.config import ToolsConfig
from tools.errors import DuplicateToolError, ToolConfigError
from tools.placement import SERVICE, WORKER, Placement, placement_of

BUILT_INS = [
    "clean_old_logs",
    "cpu_load",
    "disk_usage",
    "dns_lookup",
    "http_check",
    "largest_files",
    "list_logs",
    "memory",
    "service_restart",
    "service_status",
    "tail_log",
    "tcp_check",
    "top_processes",
]


class _Args(BaseModel):
    pass


def _named(name: str) -> Tool:
    @tool(name=name, description=f"tool {name}", placement=WORKER)
    def run(args: _Args, ctx: ToolContext) -> str:
        return name

    return run


def test_tools_come_out_sorted_by_name_whatever_the_order_in() -> None:
    registry = ToolRegistry([_named("zeta"), _named("alpha"), _named("mid")])
    assert registry.names() == ["alpha", "mid", "zeta"]
    assert [t.definition.name for t in registry.tools()] == ["alpha", "mid", "zeta"]
    assert [d.name for d in registry.definitions()] == ["alpha", "mid", "zeta"]
    assert "mid" in registry and registry.get("nope") is None and len(registry) == 3


def test_a_duplicate_name_is_an_error() -> None:
    registry = ToolRegistry([_named("same")])
    with pytest.raises(DuplicateToolError, match="two tools are named 'same'"):
        registry.register(_named("same"))


def test_the_default_registry_holds_every_built_in_with_a_clean_schema(tmp_path: Path) -> None:
    registry = build_registry(ToolsConfig(log_dirs=(tmp_path,)))
    assert registry.names() == BUILT_INS
    for item in registry.tools():
        schema = json.dumps(item.definition.parameters)
        assert "confirmed_by" not in schema and "$ref" not in schema and '"title"' not in schema
        assert item.definition.parameters["additionalProperties"] is False
        assert item.definition.description
        if item.category is not ToolCategory.READ_ONLY:
            assert not item.parallel
    assert registry["clean_old_logs"].category is ToolCategory.DESTRUCTIVE
    assert registry["service_restart"].category is ToolCategory.MUTATING


def test_the_tool_list_is_byte_identical_across_builds(tmp_path: Path) -> None:
    config = ToolsConfig(log_dirs=(tmp_path,))

    def dump() -> str:
        return json.dumps([d.model_dump() for d in build_registry(config).definitions()])

    assert dump() == dump()


def test_build_from_settings_uses_the_tools_settings(tmp_path: Path) -> None:
    catalog = tmp_path / "tools.yaml"
    catalog.write_text(
        "tools:\n  - {name: uptime, description: Uptime., category: read_only, run: [uptime]}\n"
    )
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None,
        chatops_tools_file=catalog,
        chatops_log_dirs=[str(tmp_path)],
        chatops_service_backend="kubernetes",
        chatops_kube_namespace="payments",
    )
    registry = build_registry_from_settings(settings)
    assert registry.names() == sorted([*BUILT_INS, "uptime"])
    assert str(tmp_path) in registry["tail_log"].definition.description
    assert "kubernetes backend" in registry["service_restart"].definition.description


def test_a_bad_backend_is_refused_at_start_up(tmp_path: Path) -> None:
    with pytest.raises(ToolConfigError, match="service backend 'upstart'"):
        ToolsConfig(service_backend="upstart")


def test_the_output_filter_from_settings_caps_and_redacts(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, chatops_tool_output_max_chars=500)  # type: ignore[call-arg]
    output_filter = build_output_filter(settings, env={"LLM_API_KEY": "sk-live-abcdef123456"})
    shown = output_filter("key sk-live-abcdef123456\n" + "x" * 5000)
    assert "sk-live-abcdef123456" not in shown and len(shown) <= 500


def test_commands_never_see_the_bots_secrets_even_without_settings(tmp_path: Path) -> None:
    catalog = tmp_path / "tools.yaml"
    catalog.write_text("tools:\n  - {name: show_env, description: Env., category: read_only, run: [env]}\n")
    env = {
        "PATH": "/usr/bin:/bin",
        "SLACK_BOT_TOKEN": "xoxb-secret-value",
        "LLM_API_KEY": "sk-1",
        "KEEP": "1",
    }
    registry = build_registry(ToolsConfig(tools_file=catalog, log_dirs=(tmp_path,), env=env))
    output = registry["show_env"].execute("{}", timeout=10).output
    assert "KEEP=1" in output
    assert "SLACK_BOT_TOKEN" not in output and "LLM_API_KEY" not in output


def test_a_tool_that_does_not_say_where_it_runs_is_refused_by_name() -> None:
    @tool(name="spool_depth", description="Reads this host's spool.")
    def undeclared(args: _Args, ctx: ToolContext) -> str:
        return "0"

    with pytest.raises(ToolConfigError, match=r"^tool spool_depth declares no placement: .*placement=HOST"):
        ToolRegistry([_named("fine"), undeclared])
    with pytest.raises(ToolConfigError, match="tool spool_depth declares no placement"):
        build_registry(ToolsConfig(), extra=[undeclared])


def test_every_built_in_says_where_it_runs(tmp_path: Path) -> None:
    config = ToolsConfig(
        log_dirs=(tmp_path,), prometheus_url="http://p:9090", alertmanager_url="http://a:9093"
    )
    placed = {item.definition.name: placement_of(item) for item in build_registry(config).tools()}
    host = Placement.target("runner", "local")
    assert placed == {
        **dict.fromkeys(
            ["cpu_load", "disk_usage", "memory", "top_processes", "list_logs", "tail_log", "largest_files"],
            host,
        ),
        "clean_old_logs": host,
        "service_status": SERVICE,
        "service_restart": SERVICE,
        **dict.fromkeys(["http_check", "tcp_check", "dns_lookup"], WORKER),
        **dict.fromkeys(["prometheus_query", "prometheus_range"], WORKER),
        **dict.fromkeys(["alertmanager_alerts", "alertmanager_silence"], WORKER),
    }
