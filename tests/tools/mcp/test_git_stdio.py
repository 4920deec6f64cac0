"""``mcp-server-git`` (from PyPI) over stdio, configured by the catalog block in docs/TOOLS.md.

One registry per module (the servers start once); the engine tests drive real runs with a
scripted model, real Redis and an in-process RQ worker, and check the repository itself.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml

from agent.scripted import FunctionModel, ScriptItem, tool_call
from agent.tooling import ToolCategory, call_category
from agent.types import Request
from bot.keys import Keys
from bot.policy.deciders import Action, Deciders
from bot.runs.presenter import InMemoryPresenter
from bot.slack.policy_identity import SlackIdentity
from tests.support.harness import Harness, make_options
from tests.tools.mcp.conftest import ROOT, git, make_repo, staged
from tools.config import ToolsConfig
from tools.mcp import McpPool
from tools.mcp.adapter import McpTool
from tools.registry import ToolRegistry, build_registry

DOC = ROOT / "docs" / "TOOLS.md"


def doc_catalog() -> dict[str, object]:
    """The ``mcp_servers:`` block of docs/TOOLS.md's "MCP servers" section."""
    section = DOC.read_text().split("## MCP servers", 1)[1]
    block = re.search(r"```yaml\n(.*?)```", section, re.S)
    assert block is not None, "docs/TOOLS.md's MCP section shows its configuration"
    loaded = yaml.safe_load(block.group(1))
    assert isinstance(loaded, dict)
    return loaded


def catalog_for(tmp: Path, servers: dict[str, object]) -> Path:
    path = tmp / "tools.yaml"
    path.write_text(yaml.safe_dump({"mcp_servers": servers}))
    return path


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_repo(tmp_path_factory.mktemp("repo"))


@pytest.fixture(scope="module")
def registry(repo: Path, pool: McpPool, tmp_path_factory: pytest.TempPathFactory) -> ToolRegistry:
    """The doc's git server (trust: annotations) and the same server untrusted (``plain``)."""
    servers = dict(doc_catalog()["mcp_servers"])  # type: ignore[call-overload]
    del servers["tickets"], servers["time"]  # tested in their own modules
    servers["plain"] = {**servers["git"], "trust": "none", "deny": []}
    env = {"MCP_PYTHON": sys.executable, "MCP_GIT_REPO": str(repo), "PATH": "/usr/bin:/bin"}
    path = catalog_for(tmp_path_factory.mktemp("catalog"), servers)
    return build_registry(ToolsConfig(tools_file=path, env=env), mcp_pool=pool)


def mcp(registry: ToolRegistry, name: str) -> McpTool:
    tool = registry[name]
    assert isinstance(tool, McpTool)
    return tool


def test_annotations_decide_categories_on_a_trusted_server(registry: ToolRegistry) -> None:
    assert mcp(registry, "git_git_status").category is ToolCategory.READ_ONLY
    assert mcp(registry, "git_git_status").parallel  # readOnlyHint and idempotentHint
    assert mcp(registry, "git_git_add").category is ToolCategory.MUTATING
    assert mcp(registry, "git_git_commit").category is ToolCategory.MUTATING
    assert mcp(registry, "git_git_reset").category is ToolCategory.DESTRUCTIVE
    assert "annotation" in mcp(registry, "git_git_reset").decision.reason


def test_every_tool_of_an_untrusted_server_is_mutating(registry: ToolRegistry) -> None:
    plain = [tool for tool in registry.tools() if isinstance(tool, McpTool) and tool.server == "plain"]
    assert {tool.remote_name for tool in plain} >= {"git_status", "git_add", "git_reset", "git_log"}
    assert {tool.category for tool in plain} == {ToolCategory.MUTATING}
    assert not any(tool.parallel for tool in plain)


def test_deny_globs_and_overrides_from_the_catalog(registry: ToolRegistry) -> None:
    assert "git_git_checkout" not in registry and "git_git_create_branch" not in registry
    assert "plain_git_checkout" in registry  # its own deny list is empty
    assert mcp(registry, "git_git_commit").definition.description.endswith(
        "Commit the staged changes of the repository."
    )


def test_names_and_schemas_are_valid_for_both_providers(registry: ToolRegistry) -> None:
    for tool in registry.tools():
        if isinstance(tool, McpTool):
            assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", tool.definition.name)
            assert tool.definition.parameters["type"] == "object"


def test_a_read_only_call_runs_directly(registry: ToolRegistry, repo: Path) -> None:
    result = mcp(registry, "git_git_status").execute(json.dumps({"repo_path": str(repo)}), timeout=10)
    assert not result.is_error and "new.txt" in result.output


def test_a_mutating_call_without_approval_is_refused(registry: ToolRegistry, repo: Path) -> None:
    (repo / "other.txt").write_text("x")
    result = mcp(registry, "git_git_add").execute(
        json.dumps({"repo_path": str(repo), "files": ["other.txt"]}), timeout=10
    )
    assert result.is_error and "approves" in result.output
    assert "other.txt" not in staged(repo)


def test_hostile_arguments_are_checked_and_never_reach_a_shell(registry: ToolRegistry, repo: Path) -> None:
    bad = mcp(registry, "git_git_status").execute(json.dumps({"repo_path": 42}), timeout=10)
    assert bad.is_error and "repo_path" in bad.output
    sneaky = mcp(registry, "git_git_status").execute(
        json.dumps({"repo_path": f"{repo}; touch {repo}/pwned"}), timeout=10
    )
    assert sneaky.is_error and not (repo / "pwned").exists()
    extra = mcp(registry, "git_git_status").execute(json.dumps({"repo_path": str(repo), "x": 1}), timeout=10)
    assert extra.is_error or not extra.output.startswith("Error")  # the server's schema decides extras


def test_the_destructive_preview_says_there_is_no_dry_run(registry: ToolRegistry, repo: Path) -> None:
    reset = mcp(registry, "git_git_reset")
    preview = reset.preview(json.dumps({"repo_path": str(repo)}), timeout=10)
    assert preview is not None and preview.output.startswith("This MCP tool has no dry run")
    assert str(repo) in preview.output and preview.plan == json.dumps(
        {"repo_path": str(repo)}, separators=(",", ":")
    )
    # An approval for other arguments does not run these.
    other = json.dumps(
        {"repo_path": str(repo), "confirmed_by": "U1", "approved_plan": '{"repo_path":"/elsewhere"}'}
    )
    assert reset.execute(other, timeout=10).is_error
    assert staged(repo) == ["new.txt"]


# -- through the engine ----------------------------------------------------------------------------


def turns_model(*turns: ScriptItem) -> FunctionModel:
    def answer(request: Request) -> ScriptItem:
        done = sum(1 for m in request.messages if m.role == "assistant" and m.tool_calls)
        return turns[done] if done < len(turns) else "done"

    return FunctionModel(answer, model="turns")


@pytest.fixture
def engine_repo(repo: Path) -> Path:
    """The server's own repository (it refuses any other), with ``new.txt`` staged again."""
    git(repo, "add", "new.txt")
    assert staged(repo) == ["new.txt"]
    return repo


@pytest.fixture
def harness_for(
    redis_client: redis.Redis, keys: Keys, queue_name: str, tmp_path: Path, registry: ToolRegistry
) -> Iterator[object]:
    def make(*turns: ScriptItem) -> Harness:
        return Harness(
            redis=redis_client,
            keys=keys,
            options=make_options(queue_name),
            directory=tmp_path,
            models=[turns_model(*turns)],
            tools=registry.tools(),
            presenter=InMemoryPresenter(),
        )

    yield make


def test_git_status_runs_without_a_card(harness_for: object, engine_repo: Path) -> None:
    harness = harness_for(tool_call("git_git_status", repo_path=str(engine_repo)))  # type: ignore[operator]
    run_id = harness.submit("status?")
    harness.work()
    assert harness.presenter.of("ask_approval", run_id) == []
    results = harness.tool_results(run_id)
    assert any("new.txt" in text for text in results), results


def test_git_reset_waits_for_approval_and_runs_once_after_approve(
    harness_for: object, engine_repo: Path
) -> None:
    harness = harness_for(tool_call("git_git_reset", repo_path=str(engine_repo)))  # type: ignore[operator]
    run_id = harness.submit("unstage everything")
    harness.work()
    asked = harness.presenter.of("ask_approval", run_id)
    assert len(asked) == 1 and asked[0].tool == "git_git_reset"
    assert staged(engine_repo) == ["new.txt"]  # nothing ran before the click
    assert asked[0].category is ToolCategory.DESTRUCTIVE and "no dry run" in (asked[0].preview or "")
    policy = Deciders(SlackIdentity(client_factory=lambda: None, bot_team=lambda: None))  # type: ignore[arg-type,return-value]
    assert not policy.decide("U_REQ", Action.APPROVE, asked[0]).allowed  # the requester may not approve it
    assert harness.service.lifecycle.decide(asked[0].id, user="U_APPROVER", approve=True).won
    harness.work()
    assert staged(engine_repo) == []
    results = harness.tool_results(run_id)
    assert len([text for text in results if not text.startswith("Error")]) == 1
    git(engine_repo, "add", "new.txt")  # staged again: a second execution would unstage it again
    harness.work()
    assert staged(engine_repo) == ["new.txt"]


def test_decline_leaves_the_repository_untouched(harness_for: object, engine_repo: Path) -> None:
    harness = harness_for(tool_call("git_git_reset", repo_path=str(engine_repo)))  # type: ignore[operator]
    run_id = harness.submit("unstage everything")
    harness.work()
    asked = harness.presenter.of("ask_approval", run_id)
    harness.service.lifecycle.decide(asked[0].id, user="U_APPROVER", approve=False, reason="no")
    harness.work()
    assert staged(engine_repo) == ["new.txt"]
    assert any("declined" in text for text in harness.tool_results(run_id))


def test_call_category_comes_from_the_tool(registry: ToolRegistry, repo: Path) -> None:
    args = json.dumps({"repo_path": str(repo)})
    assert call_category(registry["git_git_reset"], args).category is ToolCategory.DESTRUCTIVE


def test_the_whole_doc_block_is_a_valid_catalog(tmp_path: Path, repo: Path) -> None:
    from tools.catalog import load_catalog

    env = {
        "MCP_PYTHON": sys.executable,
        "MCP_GIT_REPO": str(repo),
        "TICKETS_MCP_URL": "http://127.0.0.1:9/mcp",
        "TICKETS_TOKEN": "tok-123",
    }
    catalog = load_catalog(catalog_for(tmp_path, doc_catalog()["mcp_servers"]), env=env)  # type: ignore[arg-type]
    servers = {server.name: server for server in catalog.mcp_servers}
    assert set(servers) == {"git", "time", "tickets"}
    assert servers["tickets"].secret_values == ("tok-123",)


def test_a_server_bound_to_a_target_is_offered_only_for_it(tmp_path: Path, pool: McpPool) -> None:
    from tools.inventory import Target

    time_server = {
        "command": [sys.executable, "-m", "mcp_server_time"],
        "trust": "annotations",
        "target": "db-01",
    }
    path = catalog_for(tmp_path, {"clock": time_server})
    bound = build_registry(ToolsConfig(tools_file=path, env={}), mcp_pool=pool)
    assert "clock_get_current_time" not in bound
    assert "clock_get_current_time" in {
        t.definition.name for t in bound.mcp_target_tools(Target("db-01", "local"))
    }
    assert bound.mcp_target_tools(Target("web-03", "local")) == []


def test_colliding_names_are_a_start_up_error_naming_both(tmp_path: Path, pool: McpPool) -> None:
    from tools.errors import McpToolsetError

    path = tmp_path / "tools.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "tools": [
                    {
                        "name": "clock_get_current_time",
                        "description": "mine",
                        "category": "read_only",
                        "run": ["date"],
                    }
                ],
                "mcp_servers": {"clock": {"command": [sys.executable, "-m", "mcp_server_time"]}},
            }
        )
    )
    with pytest.raises(
        McpToolsetError, match=r"get_current_time.*MCP server 'clock'.*clock_get_current_time"
    ):
        build_registry(ToolsConfig(tools_file=path, env={}), mcp_pool=pool)
