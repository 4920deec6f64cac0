"""FunctionTool: schema from the argument model, validation, confirmed_by, categories, timeouts."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel, ConfigDict, Field

from agent.tooling import CallCategory, Tool, ToolCategory, ToolResult
from tools.base import FunctionTool, ToolContext, tool
from tools.errors import ToolCallError, ToolConfigError


class GreetArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Who to greet.")
    times: int = Field(default=1, ge=1, le=3)
    shout: bool | None = None


@tool(category=ToolCategory.READ_ONLY, parallel=True, timeout=7)
def greet(args: GreetArgs, ctx: ToolContext) -> str:
    """Greet someone.

    More detail that the model does not need.
    """
    text = " ".join([f"hello {args.name}"] * args.times)
    return text.upper() if args.shout else text


class ServiceArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    service: str


@tool(category=ToolCategory.MUTATING, timeout=60)
def bounce(args: ServiceArgs, ctx: ToolContext) -> str:
    """Restart a service."""
    return f"bounced {args.service} (timeout {ctx.timeout:g} s, approver {ctx.confirmed_by})"


def test_a_function_tool_is_an_agent_tool_with_a_clean_schema() -> None:
    assert isinstance(greet, Tool)
    definition = greet.definition
    assert definition.name == "greet"
    assert definition.description == "Greet someone."
    assert definition.parameters == {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "Who to greet."},
            "times": {"type": "integer", "default": 1, "minimum": 1, "maximum": 3},
            "shout": {"type": "boolean"},
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    assert (greet.category, greet.parallel, greet.timeout) == (ToolCategory.READ_ONLY, True, 7.0)


def test_valid_arguments_run_the_function() -> None:
    result = greet.execute(json.dumps({"name": "ops", "times": 2}), timeout=5)
    assert result == ToolResult(output="hello ops hello ops")


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ('{"times": 2}', "name: required argument is missing"),
        ('{"name": "x", "times": 9}', "times: Input should be less than or equal to 3"),
        ('{"name": "x", "colour": "red"}', "colour: unknown argument"),
        ('{"name": ', "the arguments are not valid JSON"),
        ('["x"]', "the arguments must be a JSON object"),
    ],
)
def test_invalid_arguments_are_an_error_result_naming_the_field(arguments: str, message: str) -> None:
    result = greet.execute(arguments, timeout=5)
    assert result.is_error
    assert result.output.startswith("Error: ")
    assert message in result.output


def test_confirmed_by_is_never_advertised_but_is_accepted_and_recorded() -> None:
    assert "confirmed_by" not in json.dumps(bounce.definition.parameters)
    result = bounce.execute(json.dumps({"service": "nginx", "confirmed_by": "U024BE7LH"}), timeout=30)
    assert not result.is_error
    assert result.output == "bounced nginx (timeout 30 s, approver U024BE7LH)\n(approved by U024BE7LH)"


def test_an_approved_call_with_its_grant_runs_where_the_worker_runs_the_tool_itself() -> None:
    """With CHATOPS_RUNNER_SECRET every approval is signed; a tool the worker runs has no runner to
    check the grant and must not refuse it as an unknown argument."""
    arguments = {"service": "nginx", "confirmed_by": "U024BE7LH", "approval_grant": "signed.grant"}
    result = bounce.execute(json.dumps(arguments), timeout=30)
    assert not result.is_error and "signed.grant" not in result.output


def test_a_mutating_call_without_approval_is_refused() -> None:
    result = bounce.execute(json.dumps({"service": "nginx"}), timeout=30)
    assert result.is_error
    assert "runs only after a person approves it" in result.output


def test_a_malformed_confirmed_by_is_refused() -> None:
    result = bounce.execute(json.dumps({"service": "nginx", "confirmed_by": "--all; rm"}), timeout=30)
    assert result.is_error and "confirmed_by" in result.output


def test_the_loop_timeout_wins_when_it_is_smaller() -> None:
    result = bounce.execute(json.dumps({"service": "db", "confirmed_by": "U1"}), timeout=2.5)
    assert "timeout 2.5 s" in result.output


def test_a_read_only_tool_has_no_preview() -> None:
    assert greet.preview('{"name": "x"}', timeout=5) is None


class _NoArgs(BaseModel):
    pass


def _noop(args: _NoArgs, ctx: ToolContext) -> str:
    """Does nothing."""
    return "ok"


def test_categories_are_enforced_when_a_tool_is_made() -> None:
    with pytest.raises(ToolConfigError, match="needs a dry run"):
        FunctionTool(_noop, _NoArgs, category=ToolCategory.DESTRUCTIVE)
    with pytest.raises(ToolConfigError, match="only read_only tools may run in parallel"):
        FunctionTool(_noop, _NoArgs, category=ToolCategory.MUTATING, parallel=True)
    with pytest.raises(ToolConfigError, match="only destructive tools have a dry run"):
        FunctionTool(_noop, _NoArgs, category=ToolCategory.MUTATING, preview=_noop)
    with pytest.raises(ToolConfigError, match="tool name"):
        FunctionTool(_noop, _NoArgs, name="bad name!")


def test_a_destructive_tool_previews_then_runs_only_when_approved() -> None:
    def wipe_preview(args: _NoArgs, ctx: ToolContext) -> str:
        return "would wipe 3 files"

    tool_ = FunctionTool(_noop, _NoArgs, name="wipe", category=ToolCategory.DESTRUCTIVE, preview=wipe_preview)
    assert tool_.preview("{}", timeout=5) == ToolResult(output="would wipe 3 files")
    assert tool_.execute("{}", timeout=5).is_error
    assert tool_.execute('{"confirmed_by": "U1"}', timeout=5).output == "ok\n(approved by U1)"


def test_errors_raised_inside_a_tool_become_error_results() -> None:
    def broken(args: _NoArgs, ctx: ToolContext) -> str:
        """Raises."""
        raise ToolCallError("the disk is on fire")

    def missing(args: _NoArgs, ctx: ToolContext) -> str:
        """Opens a missing file."""
        with open("/nonexistent/file.log"):
            return "unreachable"

    assert FunctionTool(broken, _NoArgs).execute("{}", timeout=5) == ToolResult(
        output="Error: the disk is on fire", is_error=True
    )
    result = FunctionTool(missing, _NoArgs).execute("{}", timeout=5)
    assert result.output == "Error: missing: No such file or directory: /nonexistent/file.log"


def test_a_read_only_tool_ignores_a_confirmed_by_the_model_made_up() -> None:
    result = greet.execute(json.dumps({"name": "ops", "confirmed_by": "U_FAKE"}), timeout=5)
    assert result == ToolResult(output="hello ops")


# -- a call's category from its arguments (``categorize``) ------------------------------------------


class HostArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str


def _outside_corp(args: HostArgs) -> CallCategory | None:
    if args.host == "broken":
        raise RuntimeError("a bug in the categorizer")
    if args.host.endswith(".corp"):
        return None
    return CallCategory(ToolCategory.MUTATING, f"{args.host} is not listed")


@tool(category=ToolCategory.READ_ONLY, parallel=True, categorize=_outside_corp)
def probe(args: HostArgs, ctx: ToolContext) -> str:
    """Probe a host."""
    return f"probed {args.host} (approver {ctx.confirmed_by}, escalated {ctx.escalated})"


def test_categorize_raises_one_call_and_execute_holds_it_to_that() -> None:
    assert probe.category_for('{"host": "db.corp"}') == CallCategory(ToolCategory.READ_ONLY)
    raised = probe.category_for('{"host": "x.example"}')
    assert raised == CallCategory(ToolCategory.MUTATING, "x.example is not listed")
    assert probe.execute('{"host": "db.corp"}', timeout=5).output == (
        "probed db.corp (approver None, escalated False)"
    )
    refused = probe.execute('{"host": "x.example"}', timeout=5)
    assert refused.is_error and "needs approval for these arguments" in refused.output
    approved = probe.execute('{"host": "x.example", "confirmed_by": "U1"}', timeout=5)
    assert approved.output == "probed x.example (approver U1, escalated True)\n(approved by U1)"


def test_a_confirmed_by_on_a_call_nobody_had_to_approve_is_ignored() -> None:
    result = probe.execute('{"host": "db.corp", "confirmed_by": "U_MALLORY"}', timeout=5)
    assert result.output == "probed db.corp (approver None, escalated False)"


def test_invalid_arguments_and_a_broken_categorizer_get_the_tools_own_category() -> None:
    assert probe.category_for('{"hostname": "x"}') == CallCategory(ToolCategory.READ_ONLY)
    assert probe.category_for('{"host": "broken"}') == CallCategory(ToolCategory.READ_ONLY)


def test_categorize_cannot_lower_a_mutating_tool() -> None:
    lowered = FunctionTool(
        lambda args, ctx: "ran",
        ServiceArgs,
        name="restart",
        description="Restart.",
        category=ToolCategory.MUTATING,
        categorize=lambda args: CallCategory(ToolCategory.READ_ONLY),
    )
    assert lowered.category_for('{"service": "x"}').category is ToolCategory.MUTATING
    assert lowered.execute('{"service": "x"}', timeout=5).is_error  # still needs its approval
    approved = lowered.execute('{"service": "x", "confirmed_by": "U1"}', timeout=5)
    assert approved.output == "ran\n(approved by U1)"
