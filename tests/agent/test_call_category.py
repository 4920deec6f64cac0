"""One call's category (``call_category``) decides everything the loop does with that call.

A read-only, parallel tool whose ``category_for`` raises some calls to mutating (as the network
tools do for an unlisted host under ``CHATOPS_EGRESS_UNLISTED=approve``): those calls leave the
parallel batch, go through the gate with the tool's reason, are stored before anyone is asked,
and are recorded as mutating; the others run as before.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from agent.config import ConfirmRequest
from agent.events import Event, ToolEnd, ToolStart
from agent.memory import InMemoryMemory
from agent.scripted import ScriptedModel, tool_call
from agent.tooling import CallCategory, ToolCategory, call_category
from agent.types import Decision, Message, RunStatus
from tests.agent.test_run import make_config, run, tool_messages
from tests.support.tools import RecordingTool

LISTED = frozenset({"grafana.corp"})


@dataclass
class HostCheck(RecordingTool):
    """``check(host=...)``: read-only and parallel, but a host outside ``LISTED`` needs approval."""

    classified: list[str] = field(default_factory=list)

    def category_for(self, arguments: str) -> CallCategory:
        host = str(json.loads(arguments).get("host", ""))
        self.classified.append(host)
        if host == "explode":
            raise RuntimeError("cannot parse the host")
        if host in LISTED:
            return CallCategory(self.category)
        return CallCategory(ToolCategory.MUTATING, f"connects to {host}, which is not listed")


def host_check() -> HostCheck:
    return HostCheck("check", parallel=True, respond=lambda args: f"{args['host']} is up")


class Recorder:
    """A confirm callback that records what it was asked, and what history held at that moment."""

    def __init__(self, memory: InMemoryMemory, decision: Decision) -> None:
        self.memory = memory
        self.decision = decision
        self.requests: list[ConfirmRequest] = []
        self.stored_calls_when_asked: list[list[str]] = []

    def __call__(self, request: ConfirmRequest) -> Decision:
        self.requests.append(request)
        stored = [c.id for m in self.memory.load_messages() for c in m.tool_calls]
        self.stored_calls_when_asked.append(stored)
        return self.decision


def test_a_raised_call_asks_with_the_tools_reason_and_is_recorded_as_mutating() -> None:
    check = host_check()
    memory = InMemoryMemory([Message.user("is the partner up?")])
    confirm = Recorder(memory, Decision.approve("U_ALICE"))
    events: list[Event] = []
    model = ScriptedModel([tool_call("check", "c1", host="status.partner.example"), "It is up."])
    result = run(make_config(model, [check], memory=memory, confirm=confirm, on_event=events.append))
    assert result.status is RunStatus.COMPLETED
    (request,) = confirm.requests
    assert request.category is ToolCategory.MUTATING
    assert request.reason == "connects to status.partner.example, which is not listed"
    assert check.calls == [{"host": "status.partner.example", "confirmed_by": "U_ALICE"}]
    (message,) = tool_messages(memory)
    assert message.meta["category"] == "mutating" and message.meta["confirmed_by"] == "U_ALICE"
    starts = [e.category for e in events if isinstance(e, ToolStart)]
    ends = [e.category for e in events if isinstance(e, ToolEnd)]
    assert starts == ends == [ToolCategory.MUTATING]


def test_a_listed_call_of_the_same_tool_runs_at_once_as_read_only() -> None:
    check = host_check()
    memory = InMemoryMemory([Message.user("is grafana up?")])
    confirm = Recorder(memory, Decision.decline("nobody should be asked"))
    model = ScriptedModel([tool_call("check", host="grafana.corp"), "Up."])
    run(make_config(model, [check], memory=memory, confirm=confirm))
    assert confirm.requests == []
    assert check.calls == [{"host": "grafana.corp"}]
    assert tool_messages(memory)[0].meta["category"] == "read_only"


def test_a_raised_call_leaves_the_parallel_batch_and_its_turn_is_stored_before_anyone_is_asked() -> None:
    check = host_check()
    memory = InMemoryMemory([Message.user("check everything")])
    confirm = Recorder(memory, Decision.pending())
    turn = [
        tool_call("check", "a", host="grafana.corp"),
        tool_call("check", "b", host="grafana.corp"),
        tool_call("check", "c", host="exfil.example"),
        tool_call("check", "d", host="grafana.corp"),
    ]
    result = run(make_config(ScriptedModel([turn, "done"]), [check], memory=memory, confirm=confirm))
    assert result.status is RunStatus.AWAITING_APPROVAL
    assert result.pending_call_id == "x00000003"
    assert [call["host"] for call in check.calls] == ["grafana.corp", "grafana.corp"]  # d waits behind c
    # The assistant turn was in history when the person was asked (not held back for one write).
    assert confirm.stored_calls_when_asked == [["x00000001", "x00000002", "x00000003", "x00000004"]]
    assert [m.tool_call_id for m in tool_messages(memory)] == ["x00000001", "x00000002"]


@pytest.mark.parametrize(
    ("confirm", "answer"),
    [
        (lambda request: Decision.decline("not that host"), "Error: declined: not that host"),
        (None, "Error: check needs human approval and no approver is configured; it was not run"),
    ],
)
def test_declined_and_unapproved_raised_calls_never_run(confirm: Any, answer: str) -> None:
    check = host_check()
    model = ScriptedModel([tool_call("check", host="exfil.example"), "ok"])
    config = make_config(model, [check], confirm=confirm)
    run(config)
    assert check.calls == []
    assert tool_messages(config.memory)[0].content == answer  # type: ignore[arg-type]


def test_a_tool_that_cannot_classify_a_call_is_refused_and_the_run_goes_on() -> None:
    check = host_check()
    model = ScriptedModel(
        [[tool_call("check", "a", host="explode"), tool_call("check", "b", host="grafana.corp")], "ok"]
    )
    config = make_config(model, [check], confirm=lambda request: Decision.approve("U_ALICE"))
    result = run(config)
    assert result.status is RunStatus.COMPLETED
    first, second = tool_messages(config.memory)  # type: ignore[arg-type]
    assert (
        first.content
        == "Error: check could not tell what this call does: RuntimeError: cannot parse the host"
    )
    assert second.content == "grafana.corp is up"
    assert check.calls == [{"host": "grafana.corp"}]


@dataclass
class Lowering(RecordingTool):
    """A mutating tool whose ``category_for`` claims read-only: the claim is ignored."""

    def category_for(self, arguments: str) -> CallCategory:
        return CallCategory(ToolCategory.READ_ONLY)


def test_the_arguments_can_raise_a_call_never_lower_it() -> None:
    restart = Lowering("restart", category=ToolCategory.MUTATING)
    assert call_category(restart, "{}").category is ToolCategory.MUTATING
    asked: list[ToolCategory] = []

    def confirm(request: ConfirmRequest) -> Decision:
        asked.append(request.category)
        return Decision.decline("no")

    run(make_config(ScriptedModel([tool_call("restart"), "ok"]), [restart], confirm=confirm))
    assert asked == [ToolCategory.MUTATING] and restart.calls == []


def test_a_tool_without_category_for_keeps_its_own_category() -> None:
    plain = RecordingTool("disk_usage")
    assert call_category(plain, '{"host": "anything"}') == CallCategory(ToolCategory.READ_ONLY)
    assert call_category(host_check(), '{"host": "x.example"}').category is ToolCategory.MUTATING
