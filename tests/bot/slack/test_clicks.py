"""Clicks over HTTP: who may approve, double clicks, expired and superseded cards, Decline, Stop."""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agent.tooling import ToolCategory, ToolResult
from agent.types import RunStatus, ToolDef
from bot.runs.approvals import ApprovalStatus
from bot.runs.presenter import CardView
from bot.slack.delivery.client import make_client
from bot.slack.rendering import render
from tests.support.slack_bot import SlackBot
from tests.support.slack_http import signed_post
from tests.support.slack_workspace import CHANNEL, buttons
from tests.support.waiting import wait_for


def pending_card(bot: SlackBot, requester: str, plan: str) -> tuple[str, str, dict[str, Any]]:
    """Mention with ``plan``, work until the approval card: (thread ts, run id, card)."""
    ts = bot.mention(f"plan: {plan}", user=requester)
    run_id = bot.run_id(ts)
    bot.work()
    assert bot.status(run_id) is RunStatus.AWAITING_APPROVAL
    card = wait_for(lambda: next((m for m in bot.bot_replies(ts) if "Approval" in m["text"]), None))
    return ts, run_id, card


def approval_id_of(card: dict[str, Any]) -> str:
    return str(buttons(card)[0]["value"])


def status(bot: SlackBot, approval_id: str) -> ApprovalStatus:
    approval = bot.service.approvals.get(approval_id)
    assert approval is not None
    return approval.status


def notes_to(bot: SlackBot, user: str, count: int = 1) -> list[str]:
    """The ephemeral messages ``user`` got, once there are ``count`` of them."""

    def probe() -> list[str] | None:
        found = [c["params"]["text"] for c in bot.calls("chat.postEphemeral") if c["params"]["user"] == user]
        return found if len(found) >= count else None

    return wait_for(probe, what=f"{count} ephemeral note(s) to {user}")


def test_an_unauthorised_approver_changes_nothing(make_bot: Callable[..., SlackBot]) -> None:
    bot = make_bot(chatops_approvers="S_ONCALL")  # the on-call group: U_ALICE only
    ts, run_id, card = pending_card(bot, "U_BOB", "restart_service")
    approval_id = approval_id_of(card)
    assert bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)["status"] == 200
    [note] = notes_to(bot, "U_BOB")
    assert "not on this bot's approvers list" in note and "Nothing changed" in note
    bot.settle()  # what the click would (wrongly) do after its answer is done
    assert status(bot, approval_id) is ApprovalStatus.PENDING
    assert buttons(next(m for m in bot.thread(ts) if m["ts"] == card["ts"]))  # the card still asks
    bot.work()
    assert bot.executions("restart_service") == [] and bot.status(run_id) is RunStatus.AWAITING_APPROVAL

    bot.control.click(card["ts"], "U_ALICE", action_id=render.ACTION_APPROVE)  # a member of S_ONCALL
    wait_for(lambda: status(bot, approval_id) is ApprovalStatus.APPROVED, what="alice's approval")
    assert [c["params"]["usergroup"] for c in bot.calls("usergroups.users.list")][:1] == ["S_ONCALL"]
    bot.work()
    [run] = bot.executions("restart_service")
    assert run["arguments"]["confirmed_by"] == "U_ALICE"


def test_a_destructive_call_needs_an_approver_other_than_the_requester(bot: SlackBot) -> None:
    _, _, card = pending_card(bot, "U_ALICE", "delete_files")
    approval_id = approval_id_of(card)
    bot.control.click(card["ts"], "U_ALICE", action_id=render.ACTION_APPROVE)
    [note] = notes_to(bot, "U_ALICE")
    assert "other than the person who asked" in note
    bot.settle()  # what the click would (wrongly) do after its answer is done
    assert status(bot, approval_id) is ApprovalStatus.PENDING


def test_a_double_click_decides_once(bot: SlackBot) -> None:
    _, run_id, card = pending_card(bot, "U_ALICE", "restart_service")
    approval_id = approval_id_of(card)
    first = bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    # The second click of a double click, from a client still showing the buttons: the same payload.
    body = urllib.parse.urlencode({"payload": json.dumps(first["payload"])}).encode()
    again = signed_post(bot.events_url, body, content_type="application/x-www-form-urlencoded")
    assert first["status"] == 200 and again.status == 200
    [note] = notes_to(bot, "U_BOB")
    assert "Already approved by <@U_BOB>" in note and "Nothing changed" in note
    approval = bot.service.approvals.get(approval_id)
    assert approval is not None and approval.decided_by == "U_BOB"
    bot.work()
    assert len(bot.executions("restart_service")) == 1
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert len(bot.calls("chat.postEphemeral")) == 1


def test_a_click_on_an_expired_card_changes_nothing(bot: SlackBot) -> None:
    ts, run_id, card = pending_card(bot, "U_ALICE", "restart_service")
    approval_id = approval_id_of(card)
    # The approval's time ran out but the expiry job has not run yet: the click must not beat it.
    bot.redis.hset(bot.keys.approval(approval_id), "expires_at", repr(time.time() - 1))
    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)
    [note] = notes_to(bot, "U_BOB")
    assert "expired" in note and "Nothing changed" in note
    assert status(bot, approval_id) is ApprovalStatus.EXPIRED
    redrawn = bot.redrawn(ts, card["ts"])
    assert "Expired" in json.dumps(redrawn["blocks"])
    bot.work()
    assert bot.executions("restart_service") == []
    assert bot.status(run_id) is RunStatus.COMPLETED  # the model was told "approval expired"


def test_a_click_on_a_superseded_card_changes_nothing(bot: SlackBot) -> None:
    ts, run_id, card = pending_card(bot, "U_ALICE", "restart_service")
    approval_id = approval_id_of(card)
    bot.say("wait, don't restart it", user="U_BOB", thread_ts=ts)
    wait_for(lambda: status(bot, approval_id) is ApprovalStatus.SUPERSEDED, what="the superseding reply")
    bot.control.click(card["ts"], "U_ALICE", action_id=render.ACTION_APPROVE)
    [note] = notes_to(bot, "U_ALICE")
    assert "superseded" in note and "<@U_BOB>" in note and "Nothing changed" in note
    assert status(bot, approval_id) is ApprovalStatus.SUPERSEDED
    bot.work()
    assert bot.executions("restart_service") == []
    history = bot.service.history(run_id)
    assert any(m.role == "user" and m.content == "wait, don't restart it" for m in history)


def test_decline_asks_for_a_reason_that_the_model_receives(bot: SlackBot) -> None:
    ts, run_id, card = pending_card(bot, "U_ALICE", "restart_service")
    approval_id = approval_id_of(card)
    bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_DECLINE)
    [modal] = wait_for(lambda: bot.control.views(user="U_BOB"), what="the decline modal")
    assert modal["callback_id"] == render.VIEW_DECLINE and status(bot, approval_id) is ApprovalStatus.PENDING
    bot.control.submit_view(modal["id"], {render.REASON_BLOCK: {render.REASON_ACTION: "the disk is fine"}})
    wait_for(lambda: status(bot, approval_id) is ApprovalStatus.DECLINED, what="the decline")
    approval = bot.service.approvals.get(approval_id)
    assert approval is not None and approval.decided_by == "U_BOB" and approval.reason == "the disk is fine"
    redrawn = bot.redrawn(ts, card["ts"])
    assert "Declined by <@U_BOB>" in json.dumps(redrawn["blocks"])
    bot.work()
    assert bot.executions("restart_service") == []
    tool_results = [m.content or "" for m in bot.service.history(run_id) if m.role == "tool"]
    assert any("the disk is fine" in text for text in tool_results)


def test_stop_is_for_the_requester_or_an_approver_and_cancels_the_run(
    make_bot: Callable[..., SlackBot],
) -> None:
    bot = make_bot(chatops_approvers="U_ALICE")
    ts, run_id, card = pending_card(bot, "U_BOB", "restart_service check_health")
    run_card = bot.bot_replies(ts)[0]
    stop = next(b for b in buttons(run_card) if b["action_id"] == render.ACTION_STOP)
    assert stop["value"] == run_id
    bot.control.click(run_card["ts"], "U_BOB", action_id=render.ACTION_STOP)  # the requester may
    [note] = notes_to(bot, "U_BOB")
    assert "Stopping" in note
    wait_for(lambda: status(bot, approval_id_of(card)) is ApprovalStatus.DECLINED, what="the declined call")
    bot.work()
    assert bot.status(run_id) is RunStatus.CANCELLED
    assert bot.executions("restart_service") == [] and bot.executions("check_health") == []
    final = bot.bot_replies(ts)
    assert "Cancelled" in json.dumps(final[0]["blocks"])
    assert [b["action_id"] for b in buttons(final[0])] == [
        render.ACTION_TRANSCRIPT,
        render.ACTION_POSTMORTEM,
    ]  # no Stop
    assert "Cancelled" in final[-1]["text"]  # the stop notice


def test_only_the_requester_or_an_approver_may_stop(make_bot: Callable[..., SlackBot]) -> None:
    bot = make_bot(chatops_approvers="U_ALICE")
    ts = bot.mention("plan: check_health", user="U_ALICE")
    run_id = bot.run_id(ts)
    # The run stays queued (no worker): its card, Stop button included, is posted as the worker would.
    card = render.card_blocks(run_id, "U_ALICE", CardView(RunStatus.RUNNING))
    posted = make_client(bot.settings).chat_postMessage(
        channel=CHANNEL, thread_ts=ts, text="card", blocks=card
    )
    bot.control.click(str(posted["ts"]), "U_BOB", action_id=render.ACTION_STOP)
    [note] = notes_to(bot, "U_BOB")
    assert "Only the person who asked or an approver" in note
    bot.settle()  # what the click would (wrongly) do after its answer is done
    assert not bot.service.stop_requested(run_id)


@dataclass
class PressStop:
    """A long-running read-only tool during which the requester presses Stop on the run card."""

    bot: SlackBot
    thread_ts: Callable[[], str]
    name: str = "tail_logs"
    category: ToolCategory = ToolCategory.READ_ONLY
    parallel: bool = False
    timeout: float = 30.0

    @property
    def definition(self) -> ToolDef:
        return ToolDef(name=self.name, description="Tail logs.")

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        bot, thread = self.bot, self.thread_ts()
        run_id = bot.run_id(thread)
        card = bot.bot_replies(thread)[0]
        bot.control.click(card["ts"], "U_ALICE", action_id=render.ACTION_STOP)
        wait_for(lambda: bot.service.stop_requested(run_id), what="the stop request")
        return ToolResult("tailing…")

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return None


def test_stop_while_running_ends_the_run_after_the_current_step(make_bot: Callable[..., SlackBot]) -> None:
    holder: dict[str, str] = {}
    bot = make_bot(tools=[])
    bot.tools = [PressStop(bot, lambda: holder["ts"])]
    holder["ts"] = bot.mention("plan: tail_logs tail_logs tail_logs")
    bot.work()
    run_id = bot.run_id(holder["ts"])
    assert bot.status(run_id) is RunStatus.CANCELLED
    tool_results = [m for m in bot.service.history(run_id) if m.role == "tool"]
    assert len(tool_results) == 1  # the step in progress finished; no further step started
    [note] = notes_to(bot, "U_ALICE")
    assert "Stopping" in note
    assert "Cancelled" in bot.bot_replies(holder["ts"])[-1]["text"]


def test_a_click_that_arrives_before_the_worker_recorded_its_card_still_decides(bot: SlackBot) -> None:
    """The worker records the card's ts right after Slack answers the post, so a click can reach
    the web process first (under two busy loops, more than the second the web used to wait, and
    the click was refused as "not this card"). Slack's signed payload says the clicked message is
    this bot's post in the run's channel, carrying this approval's button: the card. The click
    records it and decides."""
    _, _, card = pending_card(bot, "U_ALICE", "restart_service")
    approval_id = approval_id_of(card)
    bot.redis.hset(bot.keys.approval(approval_id), mapping={"card_channel": "", "card_ts": ""})  # not yet
    assert bot.control.click(card["ts"], "U_BOB", action_id=render.ACTION_APPROVE)["status"] == 200
    assert status(bot, approval_id) is ApprovalStatus.APPROVED  # decided before the answer
    assert card_of(bot, approval_id) == (CHANNEL, card["ts"])
    bot.settle()
    assert bot.calls("chat.postEphemeral") == []  # no note: it decided


def card_of(bot: SlackBot, approval_id: str) -> tuple[str, str]:
    approval = bot.service.approvals.get(approval_id)
    assert approval is not None
    return approval.card_channel, approval.card_ts


def test_without_a_recorded_card_only_the_bots_own_post_in_the_runs_channel_is_taken_for_it(
    bot: SlackBot,
) -> None:
    """What a click may not make its card: a message of another author carrying the button
    (another app's copy), the bot's message in another channel; and a recorded card is never
    replaced. Each is a real click's payload changed and signed again (a forged payload without
    the signing secret is refused before any of this)."""
    _, _, card = pending_card(bot, "U_ALICE", "delete_files")
    approval_id = approval_id_of(card)
    key = bot.keys.approval(approval_id)
    # The requester may not approve a clean-up: a real payload that decides nothing, to change below.
    payload = bot.control.click(card["ts"], "U_ALICE", action_id=render.ACTION_APPROVE)["payload"]
    as_bob = {"user": {**payload["user"], "id": "U_BOB", "name": "bob", "username": "bob"}}

    def another_author(p: dict[str, Any]) -> None:
        p.update(as_bob)
        p["message"]["user"] = "U_MALLORY"
        p["message"].pop("bot_id", None)

    def another_channel(p: dict[str, Any]) -> None:
        p.update(as_bob)
        p["container"]["channel_id"] = p["channel"]["id"] = "C_ELSEWHERE"

    def another_message(p: dict[str, Any]) -> None:
        p.update(as_bob)
        p["container"]["message_ts"] = p["message"]["ts"] = "1700000000.000001"

    for change, recorded in [
        (another_author, ("", "")),
        (another_channel, ("", "")),
        (another_message, (CHANNEL, card["ts"])),
    ]:
        bot.redis.hset(key, mapping={"card_channel": recorded[0], "card_ts": recorded[1]})
        notes = len(bot.calls("chat.postEphemeral"))
        body = urllib.parse.urlencode({"payload": json.dumps(change_copy(payload, change))}).encode()
        assert (
            signed_post(bot.events_url, body, content_type="application/x-www-form-urlencoded").status == 200
        )
        note = wait_for(
            lambda n=notes: next(  # type: ignore[misc]
                (
                    c["params"]["text"]
                    for c in bot.calls("chat.postEphemeral")[n:]
                    if c["params"]["user"] == "U_BOB"
                ),
                None,
            ),
            what=f"the note to bob ({change.__name__})",
        )
        assert "does not belong to that approval's card" in note, change.__name__
        assert status(bot, approval_id) is ApprovalStatus.PENDING, change.__name__
        assert card_of(bot, approval_id) == recorded, change.__name__


def change_copy(payload: dict[str, Any], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(payload))
    change(copy)
    return copy
