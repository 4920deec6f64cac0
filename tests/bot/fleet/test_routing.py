"""The tools a run is offered with an inventory: one tool per name, each call routed to its target."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from agent.tooling import (
    Tool,
    ToolCategory,
    ToolResult,
    call_refusal,
    call_target,
    call_verification,
    describe_call,
)
from agent.types import ToolDef
from bot.errors import BotConfigurationError
from bot.fleet.grants import GrantSigner, arguments_sha256
from bot.fleet.routing import Fleet
from bot.keys import Keys
from bot.ops.fleet import build_fleet, load_fleet_inventory, target_descriptions
from bot.settings import Settings
from tests.tools.fakes import FakeCommands
from tools.errors import CatalogError
from tools.inventory import load_inventory
from tools.placement import WORKER
from tools.registry import build_registry_from_settings

DEPLOYMENT = {
    "metadata": {"name": "web", "generation": 2},
    "spec": {"replicas": 3},
    "status": {"readyReplicas": 3, "updatedReplicas": 3, "availableReplicas": 3, "observedGeneration": 2},
}


def write_inventory(tmp_path: Path, *targets: dict[str, Any]) -> Path:
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump({"targets": list(targets)}))
    return path


def fleet_tools(
    tmp_path: Path,
    redis_client: redis.Redis,
    keys: Keys,
    inventory: Path | None,
    channel: str = "C1",
    env: dict[str, str] | None = None,
    **settings: Any,
) -> dict[str, Tool]:
    config = Settings(
        _env_file=None,  # type: ignore[call-arg]
        chatops_inventory_file=inventory,
        chatops_runner_secret="s" * 32,
        chatops_log_dirs=[str(tmp_path)],
        **settings,
    )
    registry = build_registry_from_settings(config, env)
    fleet = build_fleet(config, redis_client, keys, registry, env=env)
    return {tool.definition.name: tool for tool in fleet.tools_for(channel)}


LOCAL = {"name": "ops-box", "via": "local", "labels": {"env": "staging"}}
STAGING = {"name": "staging", "via": "kubernetes", "kubernetes": {"context": "stg", "namespace": "shop"}}
WEB = {"name": "web-03", "via": "runner", "labels": {"env": "prod", "role": "web"}}
SSH = {
    "name": "db-01",
    "via": "ssh",
    "ssh": {"host": "db-01.example", "user": "ops", "key_file": "/k", "known_hosts": "/kh"},
}


def test_without_an_inventory_the_tools_are_as_before(
    tmp_path: Path, redis_client: redis.Redis, keys: Keys
) -> None:
    tools = fleet_tools(tmp_path, redis_client, keys, None)
    assert "target" not in tools["disk_usage"].definition.parameters["properties"]
    assert "kube_pods" not in tools


def test_host_tools_take_a_target_listed_with_its_labels(
    tmp_path: Path, redis_client: redis.Redis, keys: Keys
) -> None:
    tools = fleet_tools(tmp_path, redis_client, keys, write_inventory(tmp_path, LOCAL, STAGING, WEB))
    disk = tools["disk_usage"].definition.parameters
    assert disk["properties"]["target"]["enum"] == ["ops-box", "web-03"]  # Python tools: no Kubernetes
    assert "web-03 (env=prod, role=web)" in disk["properties"]["target"]["description"]
    assert disk["required"][0] == "target"
    restart = tools["service_restart"].definition.parameters["properties"]["target"]
    assert restart["enum"] == ["ops-box", "staging", "web-03"]
    assert tools["kube_pods"].definition.parameters["properties"]["target"]["enum"] == ["staging"]
    assert "target" not in tools["http_check"].definition.parameters["properties"]  # acts on no machine
    assert list(tools) == sorted(tools)  # the run's tool list is stable


def test_a_catalog_tool_routed_by_target_cannot_declare_its_own_target(
    tmp_path: Path, redis_client: redis.Redis, keys: Keys
) -> None:
    def catalog(*tools: dict[str, Any]) -> Path:
        path = tmp_path / "tools.yaml"
        path.write_text(yaml.safe_dump({"tools": list(tools)}))
        return path

    own_target = {"target": {"type": "string"}}
    deploy = {"name": "deploy", "description": "Deploys.", "category": "read_only", "params": own_target}
    inventory = write_inventory(tmp_path, LOCAL, WEB)
    for tool in (
        {**deploy, "run": ["echo", "{target}"]},  # routed by target: every run would fail
        {**deploy, "name": "disk_usage", "override": True, "http": {"url": "http://{target}/"}},
    ):
        with pytest.raises(CatalogError, match=r"field 'params\.target': target is reserved"):
            fleet_tools(tmp_path, redis_client, keys, inventory, chatops_tools_file=catalog(tool))
    probe = {**deploy, "name": "probe", "http": {"url": "http://{target}/"}}  # acts on no machine
    tools = fleet_tools(tmp_path, redis_client, keys, inventory, chatops_tools_file=catalog(probe))
    assert list(tools["probe"].definition.parameters["properties"]) == ["target"]  # its own, unrouted


def test_a_local_call_runs_here_and_says_where(tmp_path: Path, redis_client: redis.Redis, keys: Keys) -> None:
    tools = fleet_tools(tmp_path, redis_client, keys, write_inventory(tmp_path, LOCAL, WEB))
    result = tools["disk_usage"].execute(json.dumps({"target": "ops-box", "path": str(tmp_path)}), timeout=10)
    assert not result.is_error and result.output.startswith("[ops-box] ")
    assert (
        result.target == "ops-box"
        and result.executor
        and result.executor.endswith(f":{__import__('os').getpid()}")
    )


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        (
            {"target": "web-99"},
            "Error: no such target 'web-99' for service_restart; the targets are ops-box, web-03",
        ),
        ({"target": "WEB-03"}, "Error: no such target 'WEB-03'"),  # never a fuzzy guess
        ({"target": ["web-03"]}, "Error: no such target '[\"web-03\"]'"),
        ({}, "Error: service_restart needs a target: one of ops-box, web-03."),
    ],
)
def test_an_unknown_or_missing_target_is_refused_before_anyone_is_asked(
    tmp_path: Path, redis_client: redis.Redis, keys: Keys, arguments: dict[str, object], error: str
) -> None:
    tools = fleet_tools(tmp_path, redis_client, keys, write_inventory(tmp_path, LOCAL, WEB))
    call = json.dumps({**arguments, "service": "api"})
    refusal = call_refusal(tools["service_restart"], call)
    assert refusal is not None and refusal.startswith(error)
    assert tools["service_restart"].execute(call, timeout=5).output.startswith(error)


def test_a_channel_label_filter_offers_only_its_targets_and_a_single_one_is_the_default(
    tmp_path: Path, redis_client: redis.Redis, keys: Keys
) -> None:
    inventory = write_inventory(tmp_path, LOCAL, WEB)
    tools = fleet_tools(
        tmp_path,
        redis_client,
        keys,
        inventory,
        channel="C_PROD",
        chatops_channel_targets={"C_PROD": "env=prod"},
    )
    target = tools["disk_usage"].definition.parameters["properties"]["target"]
    assert target["enum"] == ["web-03"] and "Default in this channel: web-03" in target["description"]
    assert "target" not in tools["disk_usage"].definition.parameters.get("required", [])
    found = call_target(tools["service_restart"], json.dumps({"service": "api"}))
    assert found is not None and (found.name, found.production) == ("web-03", True)


def test_a_channel_rule_that_matches_nothing_stops_start_up(tmp_path: Path) -> None:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        chatops_inventory_file=write_inventory(tmp_path, LOCAL),
        chatops_channel_targets={"C1": "env=prod"},
    )
    with pytest.raises(BotConfigurationError, match="C1: 'env=prod' matches no target"):
        load_fleet_inventory(settings)


@pytest.mark.parametrize("target", [WEB, STAGING, SSH], ids=["runner", "kubernetes", "ssh"])
def test_targets_the_worker_does_not_run_on_need_the_runner_secret(
    tmp_path: Path, target: dict[str, Any]
) -> None:
    # A runner verifies grants on its host; the worker verifies them before an SSH or Kubernetes call.
    settings = Settings(_env_file=None, chatops_inventory_file=write_inventory(tmp_path, target))  # type: ignore[call-arg]
    with pytest.raises(BotConfigurationError, match=f"{target['via']} targets: set CHATOPS_RUNNER_SECRET"):
        load_fleet_inventory(settings)


def test_a_kubernetes_target_runs_kubectl_with_its_own_context_and_namespace(
    tmp_path: Path, redis_client: redis.Redis, keys: Keys
) -> None:
    fake = FakeCommands(tmp_path / "bin")
    fake.add("kubectl", stdout=json.dumps(DEPLOYMENT))
    tools = fleet_tools(tmp_path, redis_client, keys, write_inventory(tmp_path, LOCAL, STAGING), env=fake.env)
    result = tools["service_status"].execute(json.dumps({"target": "staging", "service": "web"}), timeout=10)
    assert result.output.startswith("[staging] deployment/web in namespace shop: 3/3 ready"), result.output
    assert fake.calls("kubectl")[-1][:2] == ["--namespace=shop", "--context=stg"]
    command = describe_call(tools["service_restart"], json.dumps({"target": "staging", "service": "web"}))
    assert command == "on staging: kubectl --namespace=shop --context=stg rollout restart deployment/web"


def test_the_system_prompt_lists_the_inventory(tmp_path: Path) -> None:
    settings = Settings(
        _env_file=None,  # type: ignore[call-arg]
        chatops_inventory_file=write_inventory(tmp_path, LOCAL, STAGING),
        chatops_runner_secret="s" * 32,
    )
    assert target_descriptions(load_fleet_inventory(settings)) == [
        "ops-box (env=staging) via local",
        "staging via kubernetes",
    ]


def test_a_changing_kubernetes_call_runs_only_with_a_grant_the_worker_verifies(
    tmp_path: Path, redis_client: redis.Redis, keys: Keys
) -> None:
    # No runner sits between the worker and the cluster: the worker checks the grant before kubectl.
    fake = FakeCommands(tmp_path / "bin")
    fake.add("kubectl", stdout=json.dumps(DEPLOYMENT))
    tools = fleet_tools(tmp_path, redis_client, keys, write_inventory(tmp_path, LOCAL, STAGING), env=fake.env)
    call = {"target": "staging", "service": "web"}
    unsigned = json.dumps({**call, "confirmed_by": "U_DAVE"})  # an approval forged in Redis has no grant
    result = tools["service_restart"].execute(unsigned, timeout=10)
    assert result.is_error and "the worker refused service_restart on staging" in result.output, result.output
    assert "it carries no approval grant" in result.output and fake.calls("kubectl") == []

    facts = {
        "approval_id": "a1",
        "execution": "run1:c1",
        "tool": "service_restart",
        "args_sha256": arguments_sha256(call),
        "target": "staging",
        "confirmed_by": "U_DAVE",
    }
    # A grant whose card showed no check, for a call whose tool declares one, is refused.
    bare = GrantSigner(("s" * 32).encode(), 600).sign(**facts)
    result = tools["service_restart"].execute(
        json.dumps({**call, "confirmed_by": "U_DAVE", "approval_grant": bare}), timeout=10
    )
    assert result.is_error and "another check and undo" in result.output, result.output
    assert fake.calls("kubectl") == []
    card = call_verification(tools["service_restart"], json.dumps(call))  # as the worker derives it
    assert card is not None and card.check is not None and card.check.tool == "service_status"
    assert not card.check.active_since_action  # the cluster's declaration: a rollout, not a systemd unit
    grant = GrantSigner(("s" * 32).encode(), 600).sign(**facts, verify=card.to_json())
    signed = json.dumps({**call, "confirmed_by": "U_DAVE", "approval_grant": grant})
    result = tools["service_restart"].execute(signed, timeout=10)
    assert not result.is_error, result.output
    assert ["--namespace=shop", "--context=stg", "rollout", "restart", "deployment/web"] in fake.calls(
        "kubectl"
    )


def test_a_catalog_tool_is_placed_by_what_it_does_not_by_the_name_it_takes(
    tmp_path: Path, redis_client: redis.Redis, keys: Keys
) -> None:
    # An override inherits nothing from the built-in it replaces: a command named like the network
    # check is routed to its targets (never run in the worker), a request named like a host tool
    # runs in the worker (it touches no machine).
    catalog = tmp_path / "tools.yaml"
    override = {"description": "d", "category": "read_only", "override": True}
    command = {**override, "name": "http_check", "run": ["uptime"]}
    request = {**override, "name": "disk_usage", "http": {"url": "https://status.example.com/"}}
    catalog.write_text(yaml.safe_dump({"tools": [command, request]}))
    inventory = write_inventory(tmp_path, LOCAL, WEB)
    tools = fleet_tools(tmp_path, redis_client, keys, inventory, chatops_tools_file=catalog)
    assert tools["http_check"].definition.parameters["properties"]["target"]["enum"] == ["ops-box", "web-03"]
    assert "target" not in tools["disk_usage"].definition.parameters["properties"]


class Undeclared:
    """A hand-made tool (a custom runtime's) that does not say where it runs."""

    def __init__(self, name: str, placement: object = None) -> None:
        self.definition = ToolDef(name=name, description="d")
        self.category = ToolCategory.READ_ONLY
        self.parallel = False
        self.timeout = 5.0
        self.placement = placement

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        raise AssertionError("never offered, never run")

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return None


def test_a_fleet_refuses_a_tool_that_does_not_say_where_it_runs(tmp_path: Path) -> None:
    inventory = load_inventory(write_inventory(tmp_path, LOCAL))
    for placement in (None, "worker", {"where": "worker"}):  # only a declared Placement counts
        with pytest.raises(BotConfigurationError, match="tool spool_depth declares no placement"):
            Fleet(inventory=inventory, local_tools=[Undeclared("spool_depth", placement)], routes={})
    worker_side = Undeclared("kube_wipe", WORKER)  # a target's own tool claiming the worker
    fleet = Fleet(
        inventory=inventory,
        local_tools=[Undeclared("api", WORKER)],
        routes={},
        target_tools=lambda target: [worker_side],
    )
    with pytest.raises(
        BotConfigurationError, match="kube_wipe is offered by target ops-box but placed in the worker"
    ):
        fleet.tools_for("C1")
