"""Declared checks, before-reads and undos (issue 34): built-ins, the catalog keys, load errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.tooling import ToolResult, call_verification
from agent.verification import Verification, same_as_approved
from tools import build_registry
from tools.builtin.kubernetes import kubernetes_tools
from tools.builtin.services import make_backend, service_tools
from tools.config import ToolsConfig
from tools.errors import CatalogError
from tools.inventory_types import Target
from tools.registry import check_declarations
from tools.targets import TargetedTool

POOL_TOOLS = """
tools:
  - name: pool_status
    description: The pool's state as JSON.
    category: read_only
    params: {pool: {type: string, pattern: "^[a-z]+$"}}
    run: [/usr/local/bin/pool, status, "{pool}"]
  - name: pool_scale
    description: Scale a pool.
    category: mutating
    params: {pool: {type: string, pattern: "^[a-z]+$"}, replicas: {type: integer, minimum: 0, maximum: 50}}
    run: [/usr/local/bin/pool, scale, "{pool}", "{replicas}"]
    before: {tool: pool_status, args: {pool: "{args.pool}"}}
    check: {tool: pool_status, args: {pool: "{args.pool}"}, expect: '"state": "running"'}
    undo: {tool: pool_scale, args: {pool: "{args.pool}", replicas: "{before.replicas}"}}
"""


def _registry(tmp_path: Path, text: str) -> object:
    catalog = tmp_path / "tools.yaml"
    catalog.write_text(text)
    return build_registry(ToolsConfig(tools_file=catalog, log_dirs=(tmp_path,)))


def _load_error(tmp_path: Path, text: str) -> str:
    with pytest.raises(CatalogError) as caught:
        _registry(tmp_path, text)
    return str(caught.value)


def test_the_issues_catalog_example_derives_its_check_before_and_undo(tmp_path: Path) -> None:
    registry = _registry(tmp_path, POOL_TOOLS)
    tool = registry["pool_scale"]  # type: ignore[index]
    found = call_verification(tool, json.dumps({"pool": "web", "replicas": 4}))
    assert found is not None and found.check is not None and found.before is not None
    assert found.undo is not None
    assert (found.check.tool, json.loads(found.check.arguments)) == ("pool_status", {"pool": "web"})
    assert found.check.expect == '"state": "running"'
    assert json.loads(found.undo.arguments) == {"pool": "web", "replicas": "{before.replicas}"}
    assert Verification.from_json(found.to_json()) == found
    assert [label for label, _ in found.card_lines()] == ["Then checks", "Reads first", "Undo"]


def test_derived_calls_go_to_the_actions_target() -> None:
    found = Verification.from_json(
        '{"check":{"tool":"service_status","arguments":"{\\"service\\":\\"api\\"}"}}'
    )
    assert found is not None
    moved = found.on_target({"service": "api", "target": "web-03"})
    assert moved.check is not None and json.loads(moved.check.arguments)["target"] == "web-03"
    assert not same_as_approved(moved, found.to_json())
    assert same_as_approved(moved, moved.to_json())


def test_a_systemd_restart_checks_the_unit_is_active_since_the_restart() -> None:
    restart = service_tools(make_backend("systemd", {}))[1]
    found = call_verification(restart, '{"service": "api"}')
    assert found is not None and found.check is not None and found.no_undo
    check = found.check
    started = 1_796_335_200.0  # 2026-12-03 22:00:00 UTC
    assert check.passed("api.service: active (running), since Thu 2026-12-03 22:00:00 UTC", False, started)
    assert not check.passed(
        "api.service: active (running), since Thu 2026-12-03 21:59:59 UTC", False, started
    )
    assert not check.passed("api.service: failed (failed), since Thu 2026-12-03 22:00:01 UTC", True, started)
    assert not check.passed(
        "api.service: activating (start), since Thu 2026-12-03 22:00:01 UTC", False, started
    )
    # With the before-read, the host's own clock decides, whatever the worker's says.
    was = "api.service: active (running), since Thu 2026-12-03 20:00:00 UTC"
    assert check.passed(
        "api.service: active (running), since Thu 2026-12-03 20:00:01 UTC", False, started, was
    )
    assert not check.passed(was, False, 0, was)  # still up from before: not restarted
    assert found.before is not None and found.before.tool == "service_status"


def test_a_kubernetes_restart_checks_its_rollout_and_scale_undoes_to_the_count_read_before() -> None:
    restart = service_tools(make_backend("kubernetes", {}))[1]
    rollout = call_verification(restart, '{"service": "api"}')
    assert rollout is not None and rollout.check is not None
    assert not rollout.check.passed("deployment/api: 1/3 ready (rollout in progress)", False, 0)
    assert rollout.check.passed("deployment/api: 3/3 ready, 3 updated, 3 available", False, 0)
    tools = kubernetes_tools({}, "default", None)
    check_declarations(tools)  # every name it declares is among them, of the right kind
    scale = next(t for t in tools if t.name == "kube_scale")
    found = call_verification(scale, '{"workload": "api", "replicas": 3}')
    assert found is not None and found.check is not None and found.undo is not None
    assert found.before is not None and found.before.tool == "kube_replicas"
    assert found.check.passed('{"workload": "deployment/api", "replicas": 3, "ready_replicas": 3}', False, 0)
    assert not found.check.passed(
        '{"workload": "deployment/api", "replicas": 3, "ready_replicas": 30}', False, 0
    )
    assert json.loads(found.undo.arguments) == {"workload": "api", "replicas": "{before.replicas}"}


def test_every_built_in_declaration_names_tools_that_are_there(tmp_path: Path) -> None:
    registry = build_registry(ToolsConfig(log_dirs=(tmp_path,)))  # checks them, or raises
    cleanup = call_verification(registry["clean_old_logs"], "{}")
    assert cleanup is not None and cleanup.undo is None and cleanup.no_undo


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ("chek: {tool: pool_status}", "field 'chek': unknown key 'chek' (did you mean 'check'?)"),
        ("check: {tool: pool_stats}", "field 'check.tool': no tool named 'pool_stats'"),
        (
            "check: {tool: pool_scale}",
            "field 'check.tool': pool_scale is mutating: a check must be a read_only",
        ),
        ("undo: {tool: pool_status}", "field 'undo.tool': pool_status is read_only: an undo must be"),
        (
            "check: {tool: pool_status, args: {pool: '{args.pol}'}}",
            "{args.pol} is not a parameter of the action",
        ),
        (
            "check: {tool: pool_status, args: {pool: '{before.x}'}}",
            "placeholder {before.x} must be {args.<field>}",
        ),
        (
            "check: {tool: pool_status, args: {pol: x}}",
            "field 'check.args.pol': pool_status has no parameter 'pol'",
        ),
        (
            "undo: {tool: pool_scale, args: {pool: x, replicas: '{before.n}'}}",
            "{before.<field>} needs a before",
        ),
        ("no_undo: gone\n    undo: {tool: pool_scale}", "field 'no_undo': give undo"),
    ],
)
def test_a_declaration_mistake_is_a_load_error_naming_file_tool_and_field(
    tmp_path: Path, change: str, said: str
) -> None:
    text = POOL_TOOLS.split("    before:")[0] + "    " + change + "\n"
    error = _load_error(tmp_path, text)
    assert "tools.yaml" in error and "tool 'pool_scale'" in error
    assert said in error


def test_a_read_only_tool_declares_no_check(tmp_path: Path) -> None:
    text = POOL_TOOLS.replace(
        'run: [/usr/local/bin/pool, status, "{pool}"]',
        'run: [/usr/local/bin/pool, status, "{pool}"]\n    check: {tool: pool_status}',
    )
    assert "only a mutating or destructive tool declares check" in _load_error(tmp_path, text)


class RunnerProxy:
    """A runner's side of a target's route: it knows the tool's shape, not its declaration."""

    def __init__(self, base: object) -> None:
        self.base = base
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> object:
        if name in ("verification_of", "declared"):
            raise AttributeError(name)
        return getattr(self.base, name)

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        self.calls.append(arguments)
        return ToolResult("api.service: active (running)")


def test_a_checks_call_names_the_actions_target_and_is_routed_to_that_targets_runner() -> None:
    status, restart = service_tools(make_backend("systemd", {}))
    web, db = Target("web-03", "runner"), Target("db-01", "runner")
    status_routes = {"web-03": (web, RunnerProxy(status)), "db-01": (db, RunnerProxy(status))}
    routed_status = TargetedTool(status, status_routes)  # type: ignore[arg-type]
    routed_restart = TargetedTool(
        restart, {"web-03": (web, RunnerProxy(restart)), "db-01": (db, RunnerProxy(restart))}
    )  # type: ignore[arg-type]
    found = call_verification(routed_restart, '{"target": "web-03", "service": "api"}')
    assert found is not None and found.check is not None
    assert json.loads(found.check.arguments) == {"service": "api", "target": "web-03"}
    routed_status.execute(found.check.arguments, timeout=5)
    assert [json.loads(c) for c in status_routes["web-03"][1].calls] == [{"service": "api"}]
    assert status_routes["db-01"][1].calls == []
