"""``FunctionTool`` called directly: the argument limits hold, and ``describe`` says what would run."""

from __future__ import annotations

import json
import shlex
from typing import Any

from pydantic import BaseModel

from agent.tooling import APPROVED_PLAN, ToolCategory, describe_call
from tools.base import FunctionTool, ToolContext


class RestartArgs(BaseModel):
    service: str


def restart(args: RestartArgs, ctx: ToolContext) -> str:
    """Restart a service."""
    return f"restarted {args.service}"


def argv(args: RestartArgs) -> list[str]:
    return ["systemctl", "restart", args.service]


def make_tool(**options: Any) -> FunctionTool[RestartArgs]:
    return FunctionTool(restart, RestartArgs, category=ToolCategory.MUTATING, **options)


def approved(arguments: dict[str, Any]) -> str:
    return json.dumps({**arguments, "confirmed_by": "U024BE7LH"})


def test_a_deep_bomb_is_an_error_result_not_an_exception() -> None:
    tool = make_tool()
    bomb = '{"service": ' + "[" * 100_000 + "]" * 100_000 + "}"
    result = tool.execute(bomb, timeout=5)
    assert result.is_error and "levels deep (at most 20): flatten them" in result.output
    assert (
        "bytes (at most 65,536)" in tool.execute('{"service": "' + "x" * 3_000_000 + '"}', timeout=5).output
    )


def test_unshowable_characters_never_reach_the_function() -> None:
    result = make_tool().execute(approved({"service": "ngi\u202enx"}), timeout=5)
    assert result.is_error
    assert result.output.startswith(
        'Error: argument "service": U+202E RIGHT-TO-LEFT OVERRIDE cannot be shown on an approval card'
    )


def test_an_oversized_argument_is_refused() -> None:
    result = make_tool().execute(approved({"service": "x" * 70_000}), timeout=5)
    assert result.is_error and "bytes (at most 65,536)" in result.output


def test_the_runtimes_plan_may_be_larger_than_the_models_arguments() -> None:
    seen: list[str | None] = []

    def delete(args: RestartArgs, ctx: ToolContext) -> str:
        """Delete what the plan lists."""
        seen.append(ctx.plan)
        return "done"

    tool = FunctionTool(
        delete, RestartArgs, category=ToolCategory.DESTRUCTIVE, preview=lambda args, ctx: "would delete"
    )
    plan = json.dumps({"files": ["/var/log/x\x1b.log.1"] * 5000})
    result = tool.execute(json.dumps({"service": "x", "confirmed_by": "U1", APPROVED_PLAN: plan}), timeout=5)
    assert not result.is_error and seen == [plan]


def test_describe_is_the_command_callbacks_text_for_valid_arguments_only() -> None:
    tool = make_tool(command=lambda args: shlex.join(argv(args)))
    assert tool.describe('{"service": "nginx"}') == "systemctl restart nginx"
    assert describe_call(tool, '{"service": "my unit"}') == "systemctl restart 'my unit'"
    assert tool.describe('{"service": "ngi\u202enx"}') is None  # refused: nothing will run
    assert tool.describe('{"nope": 1}') is None
    assert make_tool().describe('{"service": "nginx"}') is None  # no callback: the card shows arguments


def test_a_failing_describer_does_not_break_the_call() -> None:
    def broken(args: RestartArgs) -> str:
        raise RuntimeError("bug")

    assert make_tool(command=broken).describe('{"service": "nginx"}') is None
