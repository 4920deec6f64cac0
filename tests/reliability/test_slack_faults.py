"""Slack's Web API misbehaves: 429 and 500 on every method the bot calls, and hard errors.

Each method the bot calls (the worker: ``chat.postMessage``, ``chat.update``, ``reactions.add``,
``assistant.threads.setStatus``; the web process: ``reactions.add``, ``chat.update``,
``chat.postEphemeral``, ``views.open``, ``usergroups.users.list``, ``auth.test``) gets a burst
of two 429s (``Retry-After: 1``) or two 500s on its next calls, and the flow that uses it must
end exactly as it does without the fault: every message once, every click decided once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agent.tooling import ToolCategory, ToolResult
from agent.types import RunStatus, ToolDef
from bot.observability.audit import AuditKind
from bot.runs.approvals import ApprovalStatus
from bot.slack.rendering import render
from tests.support.slack_bot import SlackBot
from tests.support.slack_workspace import buttons
from tests.support.waiting import wait_for

pytestmark = pytest.mark.reliability

BURST = 2
KINDS = {
    "429": {"kind": "ratelimited", "retry_after": 1},
    "500": {"kind": "http_error", "status": 500},
}


def arm(bot: SlackBot, method: str, kind: str, count: int = BURST) -> None:
    bot.control.inject_fault(method, count=count, **KINDS[kind])  # type: ignore[arg-type]


def faults_left(bot: SlackBot) -> int:
    return sum(int(f["remaining"]) for f in bot.control.faults())


def failed_calls(bot: SlackBot, method: str) -> list[dict[str, Any]]:
    """Calls the injected fault answered (429 or 500; not Slack's ordinary ``ok: false`` answers)."""
    return [c for c in bot.calls(method) if c["status"] in (429, 500)]


def answered_once(bot: SlackBot, ts: str, answer: str) -> None:
    """One run card (finished) and one answer in the thread."""
    replies = bot.bot_replies(ts)
    assert [m["text"] for m in replies[1:]] == [answer], [m["text"] for m in replies]
    assert "Done" in json.dumps(replies[0]["blocks"]), replies[0]


# -- the worker's calls ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("method", ["chat.postMessage", "chat.update", "assistant.threads.setStatus"])
def test_the_run_card_and_answer_survive_a_burst(bot: SlackBot, method: str, kind: str) -> None:
    arm(bot, method, kind)
    ts = bot.mention("plan: check_health")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    wait_for(lambda: "Done" in json.dumps(bot.bot_replies(ts)[0]["blocks"]), what="the final card")
    answered_once(bot, ts, "done: check_health ok")
    assert len(failed_calls(bot, method)) == BURST and faults_left(bot) == 0
    if method == "assistant.threads.setStatus":
        statuses = [c["params"].get("status") for c in bot.calls(method) if c["ok"]]
        assert statuses[-1] == ""  # cleared at the end
        # A 500 is retried inside the call: the status shows while the run works. A 429 holds it
        # back for Retry-After, without the run waiting: the run may end meanwhile, and then only
        # the newest state (cleared) is sent.
        if kind == "500":
            assert statuses[0]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_eyes_on_a_reply_survive_a_burst(bot: SlackBot, kind: str) -> None:
    ts = bot.mention("plan: check_health")
    run_id = bot.run_id(ts)
    arm(bot, "reactions.add", kind)
    reply = bot.say("check web-04 too", user="U_BOB", thread_ts=ts)

    def eyes() -> list[str] | None:
        message = bot.message(ts, reply)
        return next((r["users"] for r in message.get("reactions") or [] if r["name"] == "eyes"), None)

    assert wait_for(eyes, what=":eyes: on the reply") == ["U_OPS"]
    bot.work()
    history = [m.content for m in bot.service.history(run_id) if m.role == "user"]
    assert history.count("check web-04 too") == 1
    assert len(failed_calls(bot, "reactions.add")) == BURST


# -- the web process's calls ---------------------------------------------------------------------------


def pending(bot: SlackBot, requester: str, plan: str) -> tuple[str, str, dict[str, Any]]:
    ts = bot.mention(f"plan: {plan}", user=requester)
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.AWAITING_APPROVAL
    card = wait_for(lambda: next((m for m in bot.bot_replies(ts) if "Approval" in m["text"]), None))
    return ts, run_id, card


def approval_status(bot: SlackBot, card: dict[str, Any]) -> ApprovalStatus | None:
    approval = bot.service.approvals.get(str(buttons(card)[0]["value"]))
    return approval.status if approval else None


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_while_the_approver_group_cannot_be_read_nobody_in_it_decides(
    make_bot: Callable[..., SlackBot], kind: str
) -> None:
    """Membership lookups fail closed: during the burst a click is refused with a reason (never
    decided on a stale or empty answer); after it, the member's click decides once."""
    bot = make_bot(chatops_approvers="S_ONCALL")  # the on-call group: U_ALICE
    _ts, run_id, card = pending(bot, "U_BOB", "restart_service")
    arm(bot, "usergroups.users.list", kind)
    for _ in range(BURST):
        bot.control.click(card["ts"], "U_ALICE", action_id=render.ACTION_APPROVE)
    notes = wait_for(
        lambda: [c for c in bot.calls("chat.postEphemeral") if c["ok"]][:BURST] or None, what="the notes"
    )
    assert all("Could not read the approver group" in n["params"]["text"] for n in notes)
    assert approval_status(bot, card) is ApprovalStatus.PENDING
    bot.control.click(card["ts"], "U_ALICE", action_id=render.ACTION_APPROVE)
    wait_for(lambda: approval_status(bot, card) is ApprovalStatus.APPROVED, what="the approval")
    bot.work()
    [run] = bot.executions("restart_service")
    assert run["arguments"]["confirmed_by"] == "U_ALICE" and bot.status(run_id) is RunStatus.COMPLETED
    assert len(failed_calls(bot, "usergroups.users.list")) == BURST and faults_left(bot) == 0


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("method", ["chat.postEphemeral", "chat.update"])
def test_clicks_are_decided_once_and_shown_despite_a_burst(
    make_bot: Callable[..., SlackBot], method: str, kind: str
) -> None:
    bot = make_bot(chatops_approvers="S_ONCALL")  # the on-call group: U_ALICE
    ts, run_id, card = pending(bot, "U_BOB", "restart_service")
    arm(bot, method, kind)
    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)  # not an approver
    note = wait_for(lambda: [c for c in bot.calls("chat.postEphemeral") if c["ok"]], what="the note")
    assert "not on this bot's approvers list" in note[0]["params"]["text"]
    bot.control.click(card["ts"], "U_ALICE", action_id=render.ACTION_APPROVE)
    wait_for(lambda: approval_status(bot, card) is ApprovalStatus.APPROVED, what="the approval")
    redrawn = bot.redrawn(ts, card["ts"])
    assert "Approved by <@U_ALICE>" in json.dumps(redrawn["blocks"])
    bot.work()
    [run] = bot.executions("restart_service")
    assert run["arguments"]["confirmed_by"] == "U_ALICE"
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert len([c for c in bot.calls("chat.postEphemeral") if c["ok"]]) == 1
    assert len(failed_calls(bot, method)) == BURST and faults_left(bot) == 0


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_decline_modal_opens_despite_a_burst(bot: SlackBot, kind: str) -> None:
    _ts, run_id, card = pending(bot, "U_ALICE", "restart_service")
    arm(bot, "views.open", kind, count=1)  # a click's trigger_id lives 3 s: one retry fits
    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_DECLINE)
    [modal] = wait_for(lambda: bot.control.views(user="U_BOB"), what="the decline modal")
    bot.control.submit_view(modal["id"], {render.REASON_BLOCK: {render.REASON_ACTION: "not now"}})
    wait_for(lambda: approval_status(bot, card) is ApprovalStatus.DECLINED, what="the decline")
    bot.work()
    assert bot.executions("restart_service") == []
    assert any("not now" in (m.content or "") for m in bot.service.history(run_id) if m.role == "tool")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_the_web_app_works_while_auth_test_fails_and_learns_its_identity_later(
    bot: SlackBot, kind: str
) -> None:
    assert bot.runtime is not None
    arm(bot, "auth.test", kind, count=1)
    assert bot.runtime.identity.lookup() is None  # no retry on the startup lookup: it is in the background
    ts = bot.mention("plan: check_health")
    bot.work()
    answered_once(bot, ts, "done: check_health ok")
    identity = bot.runtime.identity.lookup()
    assert identity is not None and identity.user_id == "U_OPS"


# -- errors that are not transient ----------------------------------------------------------------------


@dataclass
class ArmFault:
    """A read-only tool that makes the bot's next Slack calls fail (so a fault hits a chosen post)."""

    bot: SlackBot
    method: str
    error: str
    count: int = 1
    output: str = "armed"
    name: str = "arm"
    category: ToolCategory = ToolCategory.READ_ONLY
    parallel: bool = False
    timeout: float = 10.0

    @property
    def definition(self) -> ToolDef:
        return ToolDef(name=self.name, description="Arm a fault.")

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        self.bot.control.inject_fault(self.method, kind="error", error=self.error, count=self.count)
        return ToolResult(self.output)

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return None


def with_fault_tool(make_bot: Callable[..., SlackBot], method: str, error: str, **kwargs: Any) -> SlackBot:
    bot = make_bot()
    bot.tools = [*bot.tools, ArmFault(bot, method, error, **kwargs)]
    return bot


def test_invalid_blocks_on_the_run_card_still_shows_the_run(bot: SlackBot) -> None:
    bot.control.inject_fault("chat.postMessage", kind="error", error="invalid_blocks", count=1)
    ts = bot.mention("plan: check_health")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    replies = bot.bot_replies(ts)
    assert [m["text"] for m in replies][1:] == ["done: check_health ok"], replies
    assert "Done" in json.dumps(replies[0]) and "check_health" in json.dumps(replies[0])


def test_invalid_blocks_on_an_approval_card_still_asks_for_approval(
    make_bot: Callable[..., SlackBot],
) -> None:
    bot = with_fault_tool(make_bot, "chat.postMessage", "invalid_blocks")
    ts = bot.mention("plan: arm restart_service")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.AWAITING_APPROVAL
    card = wait_for(
        lambda: next((m for m in bot.bot_replies(ts) if render.ACTION_APPROVE in json.dumps(m)), None),
        what="an approval card with buttons",
    )
    assert "restart_service" in json.dumps(card)
    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    wait_for(lambda: bot.service.approvals.for_run(run_id)[0].status is ApprovalStatus.APPROVED)
    bot.work()
    [run] = bot.executions("restart_service")
    assert run["arguments"]["confirmed_by"] == "U_BOB"


def test_msg_too_long_on_the_answer_still_delivers_all_of_it(make_bot: Callable[..., SlackBot]) -> None:
    lines = [f"line {n}: web-03 /var/log/app.log rotated" for n in range(60)]
    bot = with_fault_tool(make_bot, "chat.postMessage", "msg_too_long", output="\n".join(lines))
    ts = bot.mention("plan: arm")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    texts = [m["text"] for m in bot.bot_replies(ts)[1:]]
    assert len(texts) >= 2, texts  # refused once whole, then posted in parts
    shown = "\n".join(texts).splitlines()
    assert shown == [f"done: {lines[0]}", *lines[1:]]


def test_not_in_channel_finishes_the_run_and_keeps_the_answer_in_the_audit(bot: SlackBot) -> None:
    bot.control.inject_fault("chat.postMessage", kind="error", error="not_in_channel", count=100)
    bot.control.inject_fault("chat.update", kind="error", error="not_in_channel", count=100)
    ts = bot.mention("plan: check_health")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert bot.bot_replies(ts) == []  # the bot cannot post there
    posts = bot.calls("chat.postMessage")
    assert 0 < len(posts) <= 3, posts  # the card and the answer were tried, not hammered
    finished = bot.service.audit.entries(run_id)[-1]
    assert finished.kind is AuditKind.RUN_FINISHED and finished.fields["output"] == "done: check_health ok"
