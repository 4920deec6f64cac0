"""The three flows end to end: signed events and clicks from the emulator, real Redis, a real RQ worker.

Mention -> run card -> answer; mention -> approval card -> Approve -> the tool ran once with
``confirmed_by`` = the clicker -> answer; mention -> reply in the thread -> the model's next
request contains the reply, which got :eyes: only once it was stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agent.scripted import FunctionModel
from agent.tooling import ToolCategory, ToolResult
from agent.types import Request, RunStatus, ToolDef
from bot.runs.approvals import ApprovalStatus
from bot.slack.rendering import render
from emulator.slack import SlackEmulatorClient
from tests.bot.runtimes import plan_step
from tests.support.slack_bot import SlackBot
from tests.support.slack_workspace import BOT_USER, CHANNEL, buttons
from tests.support.waiting import wait_for


def card_of(bot: SlackBot, ts: str) -> dict[str, Any]:
    return bot.bot_replies(ts)[0]


def approval_card(bot: SlackBot, ts: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        return next((m for m in bot.bot_replies(ts) if "Approval" in m["text"]), None)

    return wait_for(probe, what="the approval card")


def test_mention_posts_a_run_card_updated_in_place_and_the_answer(bot: SlackBot) -> None:
    ts = bot.mention("plan: check_health")
    run_id = bot.run_id(ts)
    assert bot.status(run_id) is RunStatus.QUEUED  # stored and enqueued before Slack got its 200
    bot.work()
    replies = bot.bot_replies(ts)
    assert len(replies) == 2  # one card (updated in place) and one answer
    card, answer = replies
    assert answer["text"] == "done: check_health ok"
    card_text = json.dumps(card["blocks"])
    assert "Done" in card_text and "check_health" in card_text and "tokens" in card_text
    assert [b["action_id"] for b in buttons(card)] == [
        render.ACTION_TRANSCRIPT,
        render.ACTION_POSTMORTEM,
    ]  # no Stop
    assert card["history"], "the card was edited in place"
    assert any(buttons({"blocks": h.get("blocks")}) for h in card["history"]), (
        "it had a Stop button while running"
    )
    assert len(bot.executions("check_health")) == 1
    assert bot.status(run_id) is RunStatus.COMPLETED
    # "is working…" was shown while the run worked, and the thread shows no status now.
    statuses = [c["params"].get("status") for c in bot.calls("assistant.threads.setStatus")]
    assert statuses and statuses[0] and statuses[-1] == ""


def test_mention_approve_runs_the_tool_once_with_the_clicker_as_confirmed_by(bot: SlackBot) -> None:
    ts = bot.mention("plan: delete_files", user="U_ALICE")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.AWAITING_APPROVAL
    card = approval_card(bot, ts)
    text = json.dumps(card["blocks"])
    assert "delete_files" in text and "destructive" in text and "<@U_ALICE>" in text
    assert "would delete 3 files" in text  # the dry run of a destructive call
    approve, decline = buttons(card)
    assert approve["style"] == "primary" and "confirm" in approve and decline["style"] == "danger"
    assert bot.executions("delete_files") == []

    clicked = bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    assert clicked["status"] == 200
    approval_id = approve["value"]
    wait_for(lambda: _status(bot, approval_id) is ApprovalStatus.APPROVED, what="the approval")
    redrawn = bot.redrawn(ts, card["ts"])
    assert "Approved by <@U_BOB>" in json.dumps(redrawn["blocks"]) and "<!date^" in json.dumps(
        redrawn["blocks"]
    )

    bot.work()
    assert bot.status(run_id) is RunStatus.COMPLETED
    runs = bot.executions("delete_files")
    assert len(runs) == 1 and runs[0]["arguments"]["confirmed_by"] == "U_BOB"
    assert bot.bot_replies(ts)[-1]["text"].startswith("done: delete")
    # Every event and click was acknowledged within Slack's 3 s, and none was retried. (That the
    # acknowledgement does none of the run's work shows above: nothing ran before ``bot.work()``.)
    deliveries = bot.control.deliveries()
    assert {d["kind"] for d in deliveries} == {"event", "interaction"}
    assert all(d["status"] == 200 and d["retry_num"] == 0 for d in deliveries), deliveries


@dataclass
class ReplyDuringTool:
    """A read-only tool during which a person replies in the thread; it returns once the reply
    shows :eyes:, and records whether the reply was already stored in Redis at that moment."""

    bot: SlackBot
    thread_ts: Callable[[], str]
    seen: dict[str, Any] = field(default_factory=dict)
    name: str = "watch_logs"
    category: ToolCategory = ToolCategory.READ_ONLY
    parallel: bool = False
    timeout: float = 30.0

    @property
    def definition(self) -> ToolDef:
        return ToolDef(name=self.name, description="Watch logs for a while.")

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        bot, thread = self.bot, self.thread_ts()
        reply_ts = bot.say("stop, it's web-04 not web-03", user="U_BOB", thread_ts=thread)
        eyes = wait_for(lambda: _reactions(bot.control, thread, reply_ts).get("eyes"), what=":eyes:")
        run_id = bot.run_id(thread)
        self.seen = {"eyes": eyes, "stored": [i.text for i in bot.service.inbox.peek(run_id)]}
        return ToolResult("logs: nothing new")

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return None


def test_a_thread_reply_reaches_the_models_next_request(make_bot: Callable[..., SlackBot]) -> None:
    model = FunctionModel(plan_step, model="plan")
    holder: dict[str, str] = {}
    bot = make_bot(models=[model], tools=[])
    tool = ReplyDuringTool(bot, lambda: holder["ts"])
    bot.tools = [tool]
    holder["ts"] = bot.mention("plan: watch_logs")
    bot.work()
    assert tool.seen["eyes"] == [BOT_USER]
    assert tool.seen["stored"] == ["stop, it's web-04 not web-03"]  # in Redis before :eyes: showed
    last = model.requests[-1].messages
    assert any(m.role == "user" and m.content == "stop, it's web-04 not web-03" for m in last)
    first_request: Request = model.requests[0]
    assert all("web-04" not in (m.content or "") for m in first_request.messages)
    assert bot.status(bot.run_id(holder["ts"])) is RunStatus.COMPLETED


# -- helpers ---------------------------------------------------------------------------------------


def _status(bot: SlackBot, approval_id: str) -> ApprovalStatus | None:
    approval = bot.service.approvals.get(approval_id)
    return approval.status if approval else None


def _reactions(control: SlackEmulatorClient, thread_ts: str, ts: str) -> dict[str, list[str]]:
    message = next((m for m in control.thread(CHANNEL, thread_ts) if m["ts"] == ts), {})
    return {r["name"]: r["users"] for r in message.get("reactions") or []}


def test_a_terminal_boundary_says_which_limit_and_what_was_done(make_bot: Callable[..., SlackBot]) -> None:
    bot = make_bot(chatops_max_iterations=2)
    ts = bot.mention("plan: check_health check_health check_health")
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.ITERATION_LIMIT
    card, notice = bot.bot_replies(ts)
    assert "iteration limit" in json.dumps(card["blocks"])
    assert [b["action_id"] for b in buttons(card)] == [render.ACTION_TRANSCRIPT, render.ACTION_POSTMORTEM]
    text = notice["text"]
    assert (
        "Stopped: iteration limit" in text
        and "Iterations: 2" in text
        and "Tools called: `check_health`" in text
    )
    assert "Tokens:" in text and "Last state:" in text and "check_health" in text.split("Last state:")[1]


def test_a_long_markdown_answer_is_converted_and_split(make_bot: Callable[..., SlackBot]) -> None:
    long_answer = "## Findings\n**web-03**: disk full. See [runbook](https://runbooks.example/disk).\n\n" + (
        "- removed an old log file\n" * 400
    )
    bot = make_bot(models=[FunctionModel(lambda request: long_answer)])
    ts = bot.mention("what happened?")
    bot.work()
    parts = [m["text"] for m in bot.bot_replies(ts)[1:]]
    assert len(parts) >= 3 and all(len(p) <= render.ANSWER_CHUNK for p in parts)
    assert parts[0].startswith(
        "*Findings*\n*web-03*: disk full. See runbook (<https://runbooks.example/disk>)."
    )
    assert sum(p.count("• removed an old log file") for p in parts) == 400
