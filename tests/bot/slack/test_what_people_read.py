"""What people read matches what they get, end to end: the web app, the Slack emulator, Redis and a
real RQ worker with the Slack presenter.

A declined run's card says it was declined and a run that ran no tool says so (not "Done" for
both); the approver is named as a mention wherever the bot shows text, never as the raw ID beside
it; the requester of a destructive call reads on the card, and in the confirm dialog everyone sees
before the click is sent, that someone else must approve it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.arguments import confirmed_by
from agent.tooling import ToolCategory, ToolResult
from agent.types import RunStatus, ToolDef
from bot.runs.approvals import ApprovalStatus
from bot.slack.rendering import render
from tests.bot.runtimes import file_tools
from tests.support.slack_bot import SlackBot
from tests.support.slack_workspace import buttons
from tests.support.waiting import wait_for

PEOPLE = ("U_ALICE", "U_BOB", "U_OPS")
_CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)
_MENTION = re.compile(r"<@[UW][A-Z0-9_]+(?:\|[^>]*)?>")


class ReportingDelete:
    """A destructive tool with a dry run that reports its approver as the real tools do
    (``tools.base``: "(approved by U…)" after the output), for the model to read."""

    name = "delete_files"
    category = ToolCategory.DESTRUCTIVE
    parallel = False
    timeout = 30.0

    @property
    def definition(self) -> ToolDef:
        return ToolDef(name=self.name, description="Delete old files.")

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        return ToolResult(f"deleted 3 files\n(approved by {confirmed_by(arguments)})")

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return ToolResult("would delete 3 files")


def shown_texts(message: dict[str, Any]) -> list[str]:
    """Every text of a message a person reads: its text, its blocks' texts, a stream's tasks."""
    found = [str(message.get("text") or "")]

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "text" and isinstance(value, str):
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(message.get("blocks") or [])
    for task in (message.get("stream") or {}).get("tasks") or []:
        found += [str(task.get(key) or "") for key in ("title", "details", "output")]
    return found


def raw_ids(bot: SlackBot, ts: str) -> list[str]:
    """Every person's raw ID the thread's bot messages show outside code and outside a mention."""
    offences = []
    for message in bot.bot_replies(ts):
        for text in shown_texts(message):
            prose = _MENTION.sub(" ", _CODE.sub(" ", text))
            offences += [f"{person} in {text!r}" for person in PEOPLE if person in prose]
    return offences


def head(bot: SlackBot, ts: str) -> str:
    """The run card's first line, once the card is final (its Transcript button shown)."""

    def final() -> str | None:
        card = bot.bot_replies(ts)[0]
        finished = any(b["action_id"] == render.ACTION_TRANSCRIPT for b in buttons(card))
        return str(card["blocks"][0]["text"]["text"]) if finished else None

    return wait_for(final, what="the final run card")


def approval_card(bot: SlackBot, ts: str) -> dict[str, Any]:
    return wait_for(
        lambda: next((m for m in bot.bot_replies(ts) if "Approval" in m["text"]), None), what="the card"
    )


def approval_status(bot: SlackBot, approval_id: str) -> ApprovalStatus | None:
    approval = bot.service.approvals.get(approval_id)
    return approval.status if approval else None


def test_a_declined_run_says_declined_and_a_run_with_no_tool_says_so(bot: SlackBot) -> None:
    ts = bot.mention("plan: delete_files")
    run_id = bot.run_id(ts)
    bot.work()
    card = approval_card(bot, ts)
    approve, _ = buttons(card)
    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_DECLINE)
    [modal] = wait_for(lambda: bot.control.views(user="U_BOB"), what="the decline modal")
    bot.control.submit_view(modal["id"], {render.REASON_BLOCK: {render.REASON_ACTION: "not today"}})
    wait_for(lambda: approval_status(bot, approve["value"]) is ApprovalStatus.DECLINED, what="the decline")
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED and bot.executions("delete_files") == []
    declined = head(bot, ts)
    assert declined.startswith(":no_entry: *Declined* · nothing was changed"), declined
    assert "Done" not in declined

    quiet = bot.mention("plan:")  # the model answers without calling a tool
    quiet_run = bot.run_id(quiet)
    bot.work()
    assert bot.status(quiet_run) is RunStatus.COMPLETED
    answered = head(bot, quiet)
    assert answered.startswith(":speech_balloon: *Answered* · no tool ran"), answered
    assert "Done" not in answered


def test_the_approver_is_a_mention_everywhere_never_a_raw_id_beside_it(
    make_bot: Callable[..., SlackBot], tmp_path: Path
) -> None:
    bot = make_bot(tools=[*file_tools(tmp_path), ReportingDelete()])
    ts = bot.mention("plan: check_health delete_files")
    run_id = bot.run_id(ts)
    bot.work()
    card = approval_card(bot, ts)
    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    approve, _ = buttons(card)
    wait_for(lambda: approval_status(bot, approve["value"]) is ApprovalStatus.APPROVED, what="the approval")
    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert head(bot, ts).startswith(":white_check_mark: *Done* · 1 change made")
    run_card = json.dumps(bot.bot_replies(ts)[0]["blocks"])
    assert "approved by <@U_BOB>" in run_card and "1 change made" in run_card
    answer = bot.bot_replies(ts)[-1]["text"]
    assert "(approved by <@U_BOB>)" in answer  # the model repeated the tool's line: named
    assert raw_ids(bot, ts) == []


def test_the_requester_reads_that_someone_else_must_approve_before_confirming(bot: SlackBot) -> None:
    ts = bot.mention("plan: delete_files", user="U_ALICE")
    bot.run_id(ts)
    bot.work()
    card = approval_card(bot, ts)
    text = json.dumps(card["blocks"])
    assert "Needs approval by someone other than <@U_ALICE>" in text
    approve, _ = buttons(card)
    dialog = approve["confirm"]["text"]["text"]
    assert "Only someone other than the person who asked for it may approve it." in dialog
    # What the card says holds: her own click is refused, and the call still waits for someone else.
    bot.control.click(card["ts"], "U_ALICE", action_id=render.ACTION_APPROVE)
    bot.settle()
    assert approval_status(bot, approve["value"]) is ApprovalStatus.PENDING
