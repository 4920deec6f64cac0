"""A run's tool list is decided by its first segment and kept for the whole run (real RQ jobs, real
Redis, a real stdio MCP server whose offered tools change between two segments of one run)."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from agent.evidence import FINDINGS_TOOL
from agent.scripted import FunctionModel
from agent.tooling import Tool, ToolCategory
from agent.types import RunStatus
from bot.policy.file import load_policy
from bot.policy.proposals import RunPolicy
from bot.policy.rules import AccountKind
from bot.runs.approvals import Approval
from bot.runs.presenter import InMemoryPresenter
from bot.runs.queueing import worker_queue_names
from bot.runs.record import OfferedTool
from bot.runs.run_tools import run_tools
from bot.runs.worker import ChatopsSimpleWorker
from tests.bot.runtimes import FileTool
from tests.support.harness import Harness
from tools.mcp import McpPool, build_toolset, parse_mcp_servers

ROOT = Path(__file__).resolve().parents[3]
GONE = "Error: tool hostile_hello is no longer offered (MCP server hostile stopped listing it); it was offered when this run started"


@pytest.fixture(scope="module")
def pool() -> Iterator[McpPool]:
    made = McpPool()
    yield made
    made.close()


def hostile_tools(pool: McpPool, allow: list[str]) -> list[Tool]:
    """The hostile test server's tools as a build with this ``allow`` list offers them."""
    command = [sys.executable, "-m", "tests.support.mcp_servers", "hostile"]
    spec = {"hostile": {"command": command, "cwd": str(ROOT), "timeout": 5, "allow": allow}}
    servers, problems = parse_mcp_servers(spec, {})
    assert problems == []
    return list(build_toolset(servers, pool).all_tools())


@dataclass(frozen=True)
class Members:
    """Everyone is a full member (the policy's identity lookups)."""

    def kind(self, user: str) -> AccountKind | None:
        return AccountKind.MEMBER

    def members(self, group: str) -> frozenset[str] | None:
        return frozenset()


def work(harness: Harness, tools: Sequence[Tool], policy: RunPolicy | None = None) -> None:
    """Run every due job with a runtime whose build offers ``tools`` (and enforces ``policy``)."""
    worker = ChatopsSimpleWorker(
        worker_queue_names(harness.options.queue_name),
        connection=harness.redis,
        runtime_factory=lambda: replace(harness.runtime(), tools=tools, policy=policy),
        sweep=harness.service.recover,
    )
    worker.work(burst=True, with_scheduler=True)


def offered(harness: Harness) -> list[list[str]]:
    """The tool names of each model request so far, besides the runtime's own ``update_findings``
    (offered in every request of every run)."""
    model = harness.models[0]
    assert isinstance(model, FunctionModel)
    names = [[tool.name for tool in request.tools] for request in model.requests]
    assert all(FINDINGS_TOOL in request for request in names)
    return [[name for name in request if name != FINDINGS_TOOL] for request in names]


def approve(harness: Harness, run_id: str) -> None:
    assert isinstance(harness.presenter, InMemoryPresenter)
    asked: list[Approval] = harness.presenter.of("ask_approval", run_id)
    assert len(asked) == 1
    assert harness.service.lifecycle.decide(asked[0].id, user="U_APPROVER", approve=True).won


def test_a_resumed_run_is_offered_its_first_segments_tools_and_a_new_run_the_new_ones(
    harness: Harness, pool: McpPool
) -> None:
    files = list(harness.tools)
    before = [*files, *hostile_tools(pool, ["hello", "picture"])]
    run_id = harness.submit("plan: restart_service hostile_hello")
    work(harness, before)
    assert harness.status(run_id) is RunStatus.AWAITING_APPROVAL
    first = ["check_health", "hostile_hello", "hostile_picture", "restart_service"]
    assert offered(harness) == [first]

    # Between the two segments the server's offered list changes: hello is gone, fail is new.
    after = [*files, *hostile_tools(pool, ["picture", "fail"])]
    assert {t.definition.name for t in after} == {
        "check_health",
        "hostile_fail",
        "hostile_picture",
        "restart_service",
    }
    approve(harness, run_id)
    work(harness, after)
    assert harness.status(run_id) is RunStatus.COMPLETED
    assert offered(harness) == [first, first, first]  # the added tool is absent, the removed one offered
    model = harness.models[0]
    assert isinstance(model, FunctionModel)
    definitions = [[tool.model_dump() for tool in request.tools] for request in model.requests]
    assert definitions[1] == definitions[0] == definitions[2]  # byte for byte: the prefix is unchanged
    assert harness.tool_results(run_id) == ["restart_service ok", GONE]
    assert harness.executions("restart_service")[0]["arguments"]["confirmed_by"] == "U_APPROVER"

    # A new run is offered the build's list as it is now.
    fresh = harness.submit("plan: check_health", thread_ts="200.1")
    work(harness, after)
    assert harness.status(fresh) is RunStatus.COMPLETED
    assert (
        offered(harness)[3:] == [["check_health", "hostile_fail", "hostile_picture", "restart_service"]] * 2
    )


def test_a_tool_the_policy_denies_at_resume_is_not_offered_from_the_record(
    harness: Harness, tmp_path: Path
) -> None:
    denied_gone = FileTool("gone_check", ToolCategory.READ_ONLY, tmp_path)
    gone = FileTool("gone_lookup", ToolCategory.READ_ONLY, tmp_path)
    added = FileTool("added_check", ToolCategory.READ_ONLY, tmp_path)
    files = list(harness.tools)
    run_id = harness.submit("plan: restart_service check_health gone_lookup")
    work(harness, [*files, denied_gone, gone])
    assert offered(harness) == [["check_health", "gone_check", "gone_lookup", "restart_service"]]

    # Now a rule denies check_health (still built) and gone_check (no longer built) in this channel;
    # gone_lookup is no longer built either (no rule takes it), and added_check is new.
    path = tmp_path / "policy.yaml"
    path.write_text(
        "policy:\n  rules:\n    - name: no-checks\n"
        "      match: {channels: [C1], tools: [check_health, gone_check]}\n      deny: true\n"
    )
    policy = RunPolicy(load_policy(path), Members())
    approve(harness, run_id)
    work(harness, [*files, added], policy)
    assert harness.status(run_id) is RunStatus.COMPLETED
    assert offered(harness)[1:] == [["gone_lookup", "restart_service"]] * 3  # the denied ones: dropped
    results = harness.tool_results(run_id)
    assert results[0] == "restart_service ok"
    assert results[1].startswith("Error: unknown tool check_health")  # denied: not even a stand-in
    assert results[2] == (
        "Error: tool gone_lookup is no longer offered (this worker's tool list stopped listing it); "
        "it was offered when this run started"
    )
    assert harness.executions("check_health") == [] and harness.executions("gone_lookup") == []


def test_a_run_recorded_without_a_list_is_offered_the_current_one_and_keeps_it(tmp_path: Path) -> None:
    tools = [FileTool("a", ToolCategory.READ_ONLY, tmp_path), FileTool("b", ToolCategory.MUTATING, tmp_path)]
    first = run_tools(None, tools, tools, lambda _entry: True)
    assert [t.definition.name for t in first.tools] == ["a", "b"]
    assert first.record == [OfferedTool(definition=t.definition, category=t.category) for t in tools]
    again = run_tools(first.record, tools[1:], tools[1:], lambda _entry: True)
    assert again.record is None and [t.definition.name for t in again.tools] == ["a", "b"]
    failed = again.tools[0].execute("{}", timeout=1)
    assert failed.is_error and failed.output.startswith("Error: tool a is no longer offered (this worker's")
